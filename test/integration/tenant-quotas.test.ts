/**
 * Tenants' quotas on a running gateway: a tenant at its limits (tunnels held open, a dial storm,
 * one agent too many) is refused with a clear error, and a second tenant dialing and moving
 * bytes at the same time sees none of it: every one of its dials succeeds and every byte
 * arrives. (How its latency and throughput move is a measurement, not a test: npm run bench.)
 */
import type { Socket } from "node:net";
import { status as GrpcStatus, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, patternStream, sha256Of, startHttpBackend } from "../helpers/backends.js";
import { bodyText, httpOver } from "../helpers/connect-client.js";
import { httpGet, metricAt } from "../helpers/endpoints.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { RawClient, tlsCredentials } from "../helpers/grpc-clients.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: HttpBackend;
const tenants: Record<string, CreatedTenant> = {};
const agents: RunningAgent[] = [];
const sockets = new Set<Socket>();

const MAX_TUNNELS = 6;
const DIAL_BURST = 12;

beforeAll(async () => {
  pki = await getTestPki();
  store = makeTenantStore(pki);
  tenants.acme = await store.create("acme");
  tenants.globex = await store.create("globex");
  // The dial storm's tenant: a bucket of its own, full when the storm starts.
  tenants.initech = await store.create("initech");
  // Room for the whole storm at once, so that what stops it is the dial rate.
  await store.run(["quota", "initech", "--max-tunnels=100"]);
  // Idle and stalled tunnels: the smallest budget, two base windows (2 MiB each).
  tenants.umbrella = await store.create("umbrella");
  await store.run(["quota", "umbrella", "--max-buffered-mib=4", "--max-tunnels=100"]);
  t = await startTenantGateway(store.dir, [
    "--tenant-watch-interval=200ms",
    // Each refusal must be seen as a 429 here, all from 127.0.0.1: the throttle that turns
    // repeated refusals into resets has its own suite (refusal-throttle.test.ts).
    "--refusal-throttle-threshold=0",
    `--tenant-max-tunnels=${MAX_TUNNELS}`,
    "--tenant-dial-rate=5",
    `--tenant-dial-burst=${DIAL_BURST}`,
    "--tenant-max-agents=1",
  ]);
  backend = await startHttpBackend();
  for (const id of ["acme", "globex", "initech", "umbrella"]) {
    const { agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
      `--agent-token=${tenants[id]!.agentToken}`,
      `--agent-id=${id}-agent`,
    ]);
    agents.push(agent);
  }
  await waitFor(() => t.gw.registry.size === 4, 5000, "the four agents");
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const a of agents) await a.stop();
  await t?.gw.close();
  await backend?.close();
  store?.remove();
});

/** CONNECT as `tenant`'s caller; the status, the error code, and the tunnel when it opened. */
async function connectAs(tenant: string, target = backend.address) {
  const r = await connectOnGatewayPort(
    pki,
    t.gw.addresses.agent.port,
    { token: tenants[tenant]!.callerToken },
    target,
  );
  sockets.add(r.socket);
  return r;
}

/** POSTs `n` pattern bytes through a tunnel of `tenant`; true when the backend saw exactly them. */
async function transferIntact(tenant: string, n: number): Promise<boolean> {
  const { status, socket } = await connectAs(tenant);
  if (status !== 200) return false;
  const sent = await sha256Of(patternStream(n, 7));
  const res = await httpOver(socket, "/sha256", { method: "POST", body: patternStream(n, 7) });
  const text = await bodyText(res);
  socket.destroy();
  return text.includes(sent.hex);
}

const refusals = async (quota: string) =>
  (await t.gw.metrics.quotaRefusals.get()).values.find((v) => v.labels.quota === quota)?.value ?? 0;

describe("a tenant at its quotas", () => {
  it("holding maxTunnels open: its next dial gets 429 ERR_QUOTA; the other tenant dials and moves bytes", async () => {
    const held = [];
    for (let i = 0; i < MAX_TUNNELS; i++) held.push(await connectAs("globex"));
    expect(held.map((h) => h.status)).toEqual(Array(MAX_TUNNELS).fill(200));
    expect(await connectAs("globex")).toMatchObject({ status: 429, code: "ERR_QUOTA" });
    expect(await refusals("maxTunnels")).toBe(1);
    expect(await transferIntact("acme", 4 * 1024 * 1024)).toBe(true);
    // A tunnel given back is a slot free again.
    held[0]!.socket.destroy();
    await waitFor(async () => (await connectAs("globex")).status === 200, 5000, "a slot back");
    for (const h of held) h.socket.destroy();
  });

  it("a dial storm past its rate is refused, and none of the other tenant's dials in the same moment are", async () => {
    const storm = Array.from({ length: 40 }, () => connectAs("initech"));
    // As many as acme's own maxTunnels allows at once.
    const victim = Array.from({ length: MAX_TUNNELS }, () => connectAs("acme"));
    const [stormed, served] = await Promise.all([Promise.all(storm), Promise.all(victim)]);
    for (const r of [...stormed, ...served]) r.socket.destroy();
    const refused = stormed.filter((r) => r.status === 429);
    // At most the burst (and what refilled meanwhile) got through; no other status than 200 and 429.
    expect(stormed.filter((r) => r.status === 200).length).toBeLessThanOrEqual(DIAL_BURST + 2);
    expect(refused.length + stormed.filter((r) => r.status === 200).length).toBe(40);
    expect(refused.every((r) => r.code === "ERR_QUOTA")).toBe(true);
    expect(served.map((r) => r.status)).toEqual(Array(MAX_TUNNELS).fill(200));
    expect(await refusals("dialsPerSecond")).toBe(refused.length);
  });

  it("maxBufferedMiB=4 admits two idle tunnels, as documented; stalled, they hold no more and the third dial is refused", async () => {
    const idle = [await connectAs("umbrella"), await connectAs("umbrella")];
    expect(idle.map((r) => r.status)).toEqual([200, 200]);
    // Both established, each holding only the protocol's 2 MiB window: the budget is spent.
    await waitFor(() => t.gw.activeTunnels >= 2, 5000, "the two idle tunnels");
    expect(await connectAs("umbrella")).toMatchObject({ status: 429, code: "ERR_QUOTA" });
    expect(await refusals("maxBufferedMiB")).toBe(1);
    // Now each asks for an endless download and never reads: its window cannot open past the
    // budget, so the tenant still holds at most 4 MiB here, and the next dial is still refused.
    for (const r of idle) {
      r.socket.pause();
      r.socket.write("GET /stream?n=1000000000000 HTTP/1.1\r\nhost: backend\r\n\r\n");
    }
    expect(await connectAs("umbrella")).toMatchObject({ status: 429, code: "ERR_QUOTA" });
    expect(await transferIntact("acme", 4 * 1024 * 1024)).toBe(true);
    for (const r of idle) r.socket.destroy();
    await waitFor(async () => (await connectAs("umbrella")).status === 200, 5000, "the budget given back");
  });

  it("a second agent over maxAgents is refused; the first stays and serves", async () => {
    const { agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
      `--agent-token=${tenants.globex!.agentToken}`,
      "--agent-id=globex-agent-2",
    ]);
    agents.push(agent);
    // What its operator sees: the agent's own count of refused attempts, then its readiness.
    const admin = `127.0.0.1:${agent.adminAddress.port}`;
    const failed = () => metricAt(admin, "kgw_agent_server_connect_attempts_total", { outcome: "failed" });
    await waitFor(async () => (await failed()) >= 1, 5000, "the second agent told it was refused");
    expect(await httpGet(`127.0.0.1:${agent.healthAddress.port}`, "/readyz")).toEqual({
      status: 503,
      body: "no servers connected\n",
    });
    expect(await refusals("maxAgents")).toBeGreaterThanOrEqual(1);
    expect(t.gw.registry.agents("globex").map((a) => a.info.agentId)).toEqual(["globex-agent"]);
    // What the refused agent was told: the quota and its limit, as any agent (upstream's too)
    // reads it from the stream's status.
    const raw = new RawClient(t.agent, tlsCredentials(pki, "none"));
    const call = raw.connect({
      agentid: "globex-agent-3",
      authorization: `Bearer ${tenants.globex!.agentToken}`,
    });
    const status = await new Promise<ServiceError>((resolve) => call.once("error", resolve));
    raw.client.close();
    expect({ code: status.code, details: status.details }).toMatchObject({
      code: GrpcStatus.RESOURCE_EXHAUSTED,
      details: expect.stringContaining("maxAgents 1"),
    });
    await agent.stop();
    // The first one still serves.
    expect(await transferIntact("globex", 64 * 1024)).toBe(true);
  });

  it("`kgw tenant quota` raises one tenant's limit while the gateway runs", async () => {
    await store.run(["quota", "globex", "--max-agents=2"]);
    const { agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
      `--agent-token=${tenants.globex!.agentToken}`,
      "--agent-id=globex-agent-3",
    ]);
    agents.push(agent);
    await waitFor(() => t.gw.registry.agents("globex").length === 2, 5000, "a second globex agent admitted");
    // acme's own quota is untouched: still the server's default.
    expect(((await store.run(["quota", "acme"])) as { quotas: unknown }).quotas).toEqual({});
  });
});
