/**
 * A tenant's egress policy on a running gateway, set with `kgw tenant policy` as an operator
 * sets it: judged by the server before a dial is forwarded, by our agent again after name
 * resolution, changed while everything keeps running. Every backend here is on 127.0.0.1, which
 * the default policy refuses (loopback): the tests that reach it allow loopback first, and no
 * refused dial ever opens a socket (the agent's socket factory records every attempt).
 */
import { connect as netConnect } from "node:net";
import { credentials, Metadata } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { HostResolver } from "../../lib/agent/host-resolver.js";
import { dialRequest, PacketType } from "../../lib/proto/packet.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { RawClient } from "../helpers/grpc-clients.js";
import { isType, PacketQueue } from "../helpers/packet-queue.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: HttpBackend;
let tenant: CreatedTenant;
let agent: RunningAgent;
/** Every address the agent would have connected to, in order. */
const attempts: string[] = [];

/** Names only this test's agent knows; `rebind.test` plays a name that points at loopback. */
const resolveHost: HostResolver = async (host) => {
  if (host === "rebind.test" || host === "backend.test") return [{ address: "127.0.0.1", family: 4 }];
  if (host === "127.0.0.1") return [{ address: host, family: 4 }];
  throw new Error(`getaddrinfo ENOTFOUND ${host}`);
};

beforeAll(async () => {
  pki = await getTestPki();
  store = makeTenantStore(pki);
  // The default policy, loopback refused: this test sets what it needs.
  tenant = await store.create("acme", { allowLoopback: false });
  t = await startTenantGateway(store.dir, ["--tenant-watch-interval=200ms"]);
  backend = await startHttpBackend();
  ({ agent } = await startTestAgent(
    pki,
    t.gw.addresses.agent.port,
    [`--agent-token=${tenant.agentToken}`, "--agent-id=acme-agent"],
    {
      resolveHost,
      connectSocket: ({ port, addresses }) => {
        attempts.push(`${addresses[0]!.address}:${port}`);
        return netConnect({ host: addresses[0]!.address, port });
      },
    },
  ));
  await waitFor(() => t.gw.registry.size === 1, 5000, "agent connected");
});

afterAll(async () => {
  await agent?.stop();
  await t?.gw.close();
  await backend?.close();
  store?.remove();
});

/** CONNECT with the tenant's caller token: the status and the error code a refusal carries. */
async function connectStatus(target: string): Promise<{ status: number; code: string | undefined }> {
  const r = await connectOnGatewayPort(pki, t.gw.addresses.agent.port, { token: tenant.callerToken }, target);
  r.socket.destroy();
  return { status: r.status, code: r.code };
}

/** A gRPC dial as the tenant's caller (its token as metadata): the DIAL_RSP's error, "" if none. */
async function grpcDial(target: string): Promise<string> {
  const token = tenant.callerToken;
  const creds = credentials.combineChannelCredentials(
    credentials.createSsl(Buffer.from(pki.ca.certPem)),
    credentials.createFromMetadataGenerator((_params, cb) => {
      const md = new Metadata();
      md.set("authorization", `Bearer ${token}`);
      cb(null, md);
    }),
  );
  const client = new RawClient(`127.0.0.1:${t.gw.addresses.agent.port}`, creds);
  try {
    const call = client.proxy();
    call.on("error", () => {});
    const packets = new PacketQueue(call);
    call.write(dialRequest(target, 1n));
    const rsp = await packets.next(isType(PacketType.DIAL_RSP));
    call.end();
    return rsp.error;
  } finally {
    client.close();
  }
}

const refusals = async (rule: string) =>
  (await t.gw.metrics.egressRefusals.get()).values.find((v) => v.labels.rule === rule)?.value ?? 0;

async function setPolicy(...args: string[]): Promise<void> {
  await store.run(["policy", "acme", "--set", ...args]);
}

describe("a tenant's egress policy", () => {
  it("the default refuses the agent's loopback at the server: 403 and a DIAL_RSP error, nothing forwarded", async () => {
    const target = `127.0.0.1:${backend.port}`;
    expect(await connectStatus(target)).toEqual({ status: 403, code: "ERR_DESTINATION_NOT_ALLOWED" });
    expect(await grpcDial(target)).toMatch(/destination not allowed.*loopback/);
    expect(await connectStatus(`localhost:${backend.port}`)).toMatchObject({ status: 403 });
    expect(await refusals("loopback")).toBe(3);
    expect(attempts).toEqual([]);
  });

  it("every other spelling of loopback or metadata is refused alike over CONNECT and gRPC, nothing forwarded", async () => {
    const port = backend.port;
    // FQDNs of loopback: a policy matter (403), judged without the trailing dot.
    for (const host of ["localhost.", "foo.localhost."]) {
      expect(await connectStatus(`${host}:${port}`)).toEqual({
        status: 403,
        code: "ERR_DESTINATION_NOT_ALLOWED",
      });
      expect(await grpcDial(`${host}:${port}`)).toMatch(/destination not allowed.*loopback/);
    }
    // Addresses spelt as inet_aton reads them: refused as malformed (400), naming the address.
    const spellings = [
      ["127.1", "127.0.0.1"],
      ["2130706433", "127.0.0.1"],
      ["0x7f000001", "127.0.0.1"],
      ["0251.0376.0251.0376", "169.254.169.254"],
      ["169.254.169.254.", "169.254.169.254"],
    ] as const;
    for (const [host, address] of spellings) {
      expect((await connectStatus(`${host}:${port}`)).status).toBe(400);
      expect(await grpcDial(`${host}:${port}`)).toContain(`IPv4 address ${address}`);
    }
    // IPv4-mapped loopback is loopback on both.
    expect(await connectStatus(`[::ffff:127.0.0.1]:${port}`)).toMatchObject({ status: 403 });
    expect(await grpcDial(`[::ffff:7f00:1]:${port}`)).toMatch(/destination not allowed.*loopback/);
    expect(attempts).toEqual([]);
  });

  it("a change takes effect on the next dial, without reconnecting anything", async () => {
    await setPolicy(`127.0.0.1/32:${backend.port}`, "--allow-loopback");
    await waitFor(
      async () => (await connectStatus(`127.0.0.1:${backend.port}`)).status === 200,
      5000,
      "allowed",
    );
    expect(await grpcDial(`127.0.0.1:${backend.port}`)).toBe("");
    expect(attempts.at(-1)).toBe(`127.0.0.1:${backend.port}`);
    // Another port of the same address: no rule lists it.
    const before = attempts.length;
    const other = await connectStatus(`127.0.0.1:${backend.port === 1 ? 2 : backend.port - 1}`);
    expect(other.status).toBe(403);
    expect(await refusals("no_rule")).toBeGreaterThanOrEqual(1);
    expect(attempts.length).toBe(before);
  });

  it("a name the server lets through is refused by the agent when it resolves to loopback (DNS rebinding)", async () => {
    // Names allowed, loopback not: the server cannot see what rebind.test resolves to, the agent can.
    await setPolicy("*", "0.0.0.0/0");
    await waitFor(
      async () => (await connectStatus(`127.0.0.1:${backend.port}`)).status === 403,
      5000,
      "policy applied",
    );
    const before = attempts.length;
    expect(await connectStatus(`rebind.test:${backend.port}`)).toEqual({
      status: 403,
      code: "ERR_DESTINATION_NOT_ALLOWED",
    });
    expect(await grpcDial(`rebind.test:${backend.port}`)).toContain(
      "rebind.test resolves to 127.0.0.1, which is loopback",
    );
    expect(attempts.length).toBe(before);
    // The agent counts it on its admin port, as an operator would see it.
    const metrics = await (await fetch(`http://127.0.0.1:${agent.adminAddress.port}/metrics`)).text();
    expect(metrics).toContain('kgw_agent_destination_refusals_total{rule="loopback"} 2');
  });

  it("with loopback allowed the same name reaches the backend", async () => {
    await setPolicy("*", "0.0.0.0/0", "--allow-loopback");
    await waitFor(
      async () => (await connectStatus(`backend.test:${backend.port}`)).status === 200,
      5000,
      "allowed",
    );
    expect(attempts.at(-1)).toBe(`127.0.0.1:${backend.port}`);
  });

  it("`kgw tenant policy` shows the policy in canonical form", async () => {
    const shown = (await store.run(["policy", "acme"])) as { egress: unknown };
    expect(shown.egress).toEqual({ allow: ["*", "0.0.0.0/0"], allowLoopback: true, allowLinkLocal: false });
  });
});
