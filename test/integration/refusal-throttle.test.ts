/**
 * A source that keeps being refused is refused more cheaply: past --refusal-throttle-threshold
 * refusals a second, its new connections are reset before TLS except --refusal-throttle-rate a
 * second, while a tenant dialing from another address goes on as before. The storm comes from
 * 127.0.0.3, as another control plane's host would; the good caller from 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { bodyText, httpOver } from "../helpers/connect-client.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: HttpBackend;
let acme: CreatedTenant;
let initech: CreatedTenant;
const agents: RunningAgent[] = [];

const THRESHOLD = 5;
const RATE = 2;

beforeAll(async () => {
  pki = await getTestPki();
  store = makeTenantStore(pki);
  acme = await store.create("acme");
  initech = await store.create("initech");
  await store.run(["quota", "initech", "--max-tunnels=1"]);
  t = await startTenantGateway(store.dir, [
    `--refusal-throttle-threshold=${THRESHOLD}`,
    `--refusal-throttle-rate=${RATE}`,
  ]);
  backend = await startHttpBackend();
  for (const tenant of [acme, initech]) {
    const { agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
      `--agent-token=${tenant.agentToken}`,
    ]);
    agents.push(agent);
  }
  await waitFor(() => t.gw.registry.size === 2, 5000, "the agents");
});

afterAll(async () => {
  for (const a of agents) await a.stop();
  await t?.gw.close();
  await backend?.close();
  store?.remove();
});

type Outcome = { status: number; code?: string } | { reset: string };

/** One CONNECT with a token nobody issued, from `from`: its answer, or how it ended without one. */
const badCaller = (from: string) => callerFrom(from, "kgw_caller_nope");

async function callerFrom(from: string, token: string): Promise<Outcome> {
  try {
    const r = await connectOnGatewayPort(
      pki,
      t.gw.addresses.agent.port,
      { token, from },
      `127.0.0.1:${backend.port}`,
    );
    r.socket.destroy();
    return { status: r.status, code: r.code };
  } catch (err) {
    return { reset: (err as NodeJS.ErrnoException).code ?? (err as Error).message };
  }
}

async function goodDial(): Promise<string> {
  const r = await connectOnGatewayPort(
    pki,
    t.gw.addresses.agent.port,
    { token: acme.callerToken },
    `127.0.0.1:${backend.port}`,
  );
  expect(r.status).toBe(200);
  const res = await httpOver(r.socket, "/hello");
  const body = await bodyText(res);
  r.socket.destroy();
  return body;
}

const metric = async (name: string, labels = "") => {
  const text = await t.gw.metrics.registry.metrics();
  const line = text.split("\n").find((l) => l.startsWith(`${name}${labels}`));
  return line ? Number(line.split(" ").at(-1)) : 0;
};

describe("a source that keeps being refused", () => {
  it("is reset before TLS past the threshold, while another source's tenant dials as before", async () => {
    const started = Date.now();
    const outcomes: Outcome[] = [];
    for (let i = 0; i < 40; i++) outcomes.push(await badCaller("127.0.0.3"));
    const seconds = (Date.now() - started) / 1000;

    const answered = outcomes.filter((o) => "status" in o) as Array<{ status: number; code?: string }>;
    const reset = outcomes.filter((o) => "reset" in o);
    // Every answer it did get says why.
    for (const a of answered) expect(a.status).toBe(401);
    // The threshold's worth (its bucket) and one more to cross it, then the rate.
    expect(answered.length).toBeGreaterThan(THRESHOLD);
    expect(answered.length).toBeLessThanOrEqual(THRESHOLD + 1 + Math.ceil(seconds * (THRESHOLD + RATE)) + 1);
    expect(reset.length).toBeGreaterThan(0);
    expect(
      await metric("kgw_server_rejected_connections_total", '{listener="agent",reason="source_throttled"}'),
    ).toBe(reset.length);
    expect(await metric("kgw_server_throttled_sources")).toBeGreaterThanOrEqual(1);

    // Meanwhile a tenant's caller on another address is served at once, again and again.
    for (let i = 0; i < 10; i++) expect(await goodDial()).toContain("hello");
  });

  it("still gets through at the throttled rate, so a client that fixed itself learns it", async () => {
    await waitFor(
      async () => {
        const o = await badCaller("127.0.0.3");
        return "status" in o && o.status === 401;
      },
      5000,
      "an answer within the throttled rate",
    );
  });

  it("counts a tenant's quota refusals too: a dial storm at maxTunnels is throttled, not its tunnels", async () => {
    // initech holds its one tunnel open and storms from its own host for more.
    const held = await connectOnGatewayPort(
      pki,
      t.gw.addresses.agent.port,
      { token: initech.callerToken, from: "127.0.0.4" },
      `127.0.0.1:${backend.port}`,
    );
    expect(held.status).toBe(200);
    const outcomes: Outcome[] = [];
    for (let i = 0; i < 30; i++) outcomes.push(await callerFrom("127.0.0.4", initech.callerToken));
    const answered = outcomes.filter((o) => "status" in o) as Array<{ status: number; code?: string }>;
    for (const a of answered) expect(a).toEqual({ status: 429, code: "ERR_QUOTA" });
    expect(outcomes.some((o) => "reset" in o)).toBe(true);
    // The tunnel it holds carries on.
    const res = await httpOver(held.socket, "/hello");
    expect(await bodyText(res)).toContain("hello");
    held.socket.destroy();
  });

  it("is logged within a budget, never a line per refusal at info", async () => {
    const infoRefusals = t.logs.filter(
      (l) => l.includes('"refused a caller') && l.includes('"level":"info"'),
    );
    expect(infoRefusals.length).toBeGreaterThan(0);
    expect(infoRefusals.length).toBeLessThanOrEqual(20);
  });
});
