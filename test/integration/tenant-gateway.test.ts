/**
 * The gateway in tenant mode, as an operator sets it up: tenants made with `kgw tenant`, agents
 * with their tenant's token, callers with the bundle's certificate or a caller token, all on the
 * one agent port (8132). Each dial must reach its own tenant's agent; a revoked credential or a
 * deleted tenant must close what it opened. (Attacks on the isolation: tenant-isolation.test.ts.)
 */
import { readFileSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { join } from "node:path";
import { credentials, Metadata } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { SocketFactory } from "../../lib/agent/dial-target.js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { BROKEN_TUNNEL_ERRORS, bodyText, httpOver } from "../helpers/connect-client.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort as connectOnPort, type GatewayConnect } from "../helpers/gateway-connect.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: HttpBackend;
const tenants: Record<string, CreatedTenant> = {};
const agents: Record<string, RunningAgent> = {};
/** Which tenant's agent made each backend connection, in order. */
const dialsBy: string[] = [];

/** The agent's socket factory, tagged: the backend cannot tell two in-process agents apart. */
function taggedSockets(tenant: string): SocketFactory {
  return ({ port, addresses }) => {
    dialsBy.push(tenant);
    return netConnect({ host: addresses[0]?.address ?? "127.0.0.1", port });
  };
}

async function startTenantAgent(id: string, extra: string[] = []): Promise<RunningAgent> {
  const { agent } = await startTestAgent(
    pki,
    t.gw.addresses.agent.port,
    [`--agent-token=${tenants[id]!.agentToken}`, `--agent-id=${id}-agent`, ...extra],
    { connectSocket: taggedSockets(id) },
  );
  return agent;
}

beforeAll(async () => {
  pki = await getTestPki();
  store = makeTenantStore(pki);
  tenants.acme = await store.create("acme");
  tenants.globex = await store.create("globex");
  t = await startTenantGateway(store.dir, [
    `--uds-name=${join(store.dir, "..", "acme.sock")}`,
    "--uds-tenant=acme",
  ]);
  backend = await startHttpBackend();
  agents.acme = await startTenantAgent("acme");
  agents.globex = await startTenantAgent("globex");
  await waitFor(() => t.gw.registry.size === 2, 5000, "both agents connected");
});

afterAll(async () => {
  for (const a of Object.values(agents)) await a.stop();
  await t.gw.close();
  await backend.close();
  store.remove();
});

interface Caller {
  cert?: { certPem: string | Buffer; keyPem: string | Buffer };
  token?: string;
}

/** The bundle's client certificate, read from the files `kgw tenant create` wrote. */
function bundleCert(id: string) {
  const files = tenants[id]!.bundleFiles;
  return { certPem: readFileSync(files.clientCert!), keyPem: readFileSync(files.clientKey!) };
}

/** CONNECT on the agent port (8132), with Node's https client. */
function connectOnGatewayPort(caller: Caller, target: string): Promise<GatewayConnect> {
  return connectOnPort(pki, t.gw.addresses.agent.port, caller, target);
}

async function helloThrough(socket: Socket): Promise<string> {
  const res = await httpOver(socket, "/hello");
  return bodyText(res);
}

describe("one port, every role", () => {
  it.each([
    ["acme", "the bundle's client certificate"],
    ["globex", "the bundle's client certificate"],
  ])("a CONNECT from %s's control plane with %s reaches %s's agent only", async (id) => {
    const before = dialsBy.length;
    const r = await connectOnGatewayPort({ cert: bundleCert(id) }, backend.address);
    expect(r.status).toBe(200);
    expect(await helloThrough(r.socket)).toBe("hello from the backend");
    expect(dialsBy.slice(before)).toEqual([id]);
  });

  it("a CONNECT with a caller token in Proxy-Authorization reaches its tenant's agent", async () => {
    const before = dialsBy.length;
    const r = await connectOnGatewayPort({ token: tenants.globex!.callerToken }, backend.address);
    expect(r.status).toBe(200);
    expect(await helloThrough(r.socket)).toBe("hello from the backend");
    expect(dialsBy.slice(before)).toEqual(["globex"]);
  });

  it("a gRPC caller with the bundle's certificate reaches its tenant's agent", async () => {
    const cert = bundleCert("acme");
    const client = new TunnelClient(
      `127.0.0.1:${t.gw.addresses.agent.port}`,
      credentials.createSsl(Buffer.from(pki.ca.certPem), cert.keyPem, cert.certPem),
      { "grpc.ssl_target_name_override": "localhost" },
    );
    try {
      const before = dialsBy.length;
      expect(await helloThrough((await client.dial(backend.address)) as unknown as Socket)).toBe(
        "hello from the backend",
      );
      expect(dialsBy.slice(before)).toEqual(["acme"]);
    } finally {
      client.close();
    }
  });

  it("a gRPC caller with a caller token as authorization metadata reaches its tenant's agent", async () => {
    const token = tenants.globex!.callerToken;
    const client = new TunnelClient(
      `127.0.0.1:${t.gw.addresses.agent.port}`,
      credentials.combineChannelCredentials(
        credentials.createSsl(Buffer.from(pki.ca.certPem)),
        credentials.createFromMetadataGenerator((_params, cb) => {
          const md = new Metadata();
          md.set("authorization", `Bearer ${token}`);
          cb(null, md);
        }),
      ),
      { "grpc.ssl_target_name_override": "localhost" },
    );
    try {
      const before = dialsBy.length;
      expect(await helloThrough((await client.dial(backend.address)) as unknown as Socket)).toBe(
        "hello from the backend",
      );
      expect(dialsBy.slice(before)).toEqual(["globex"]);
    } finally {
      client.close();
    }
  });

  it("a CONNECT with no credential gets 407 and the scheme to use", async () => {
    const r = await connectOnGatewayPort({}, backend.address);
    expect(r.status).toBe(407);
    expect(r.headers["proxy-authenticate"]).toBe('Bearer realm="kgw"');
  });

  it("the Unix socket serves its configured tenant", async () => {
    const before = dialsBy.length;
    const socket = netConnect(t.gw.addresses.uds!);
    await new Promise((resolve) => socket.once("connect", resolve));
    socket.write(`CONNECT ${backend.address} HTTP/1.1\r\nHost: ${backend.address}\r\n\r\n`);
    const head = await new Promise<string>((resolve) =>
      socket.once("data", (c: Buffer) => resolve(c.toString())),
    );
    expect(head).toMatch(/^HTTP\/1\.1 200 /);
    socket.write("GET /hello HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n");
    const body = await new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (c: Buffer) => {
        text += c.toString();
      });
      socket.once("close", () => resolve(text));
    });
    expect(body).toMatch(/hello from the backend$/);
    expect(dialsBy.slice(before)).toEqual(["acme"]);
  });
});

describe("changes in the store reach the running gateway", () => {
  it("a revoked caller token breaks off its open tunnel (an error, never an end) and is refused afterwards", async () => {
    const tenant = await store.create("initech");
    tenants.initech = tenant;
    const agent = await startTenantAgent("initech");
    agents.initech = agent;
    await waitFor(() => t.gw.registry.agents("initech").length === 1, 5000, "initech's agent");
    const r = await connectOnGatewayPort({ token: tenant.callerToken }, backend.address);
    expect(r.status).toBe(200);
    const ended = new Promise<string>((resolve) => {
      r.socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      r.socket.once("end", () => resolve("end"));
    });
    const tokenId = tenant.callerToken.split("_")[3]!;
    const revokedAt = Date.now();
    await store.run(["revoke", "initech", tokenId, "--yes"]);
    expect(BROKEN_TUNNEL_ERRORS).toContain(await ended);
    // Documented bound: the watch interval (250 ms here) plus one read.
    expect(Date.now() - revokedAt).toBeLessThan(2000);
    expect((await connectOnGatewayPort({ token: tenant.callerToken }, backend.address)).status).toBe(401);
    // The agent's own credential was not touched.
    expect(t.gw.registry.agents("initech")).toHaveLength(1);
  });

  it("a deleted tenant's agents are disconnected and its callers refused", async () => {
    tenants.umbrella = await store.create("umbrella");
    const agent = await startTenantAgent("umbrella");
    agents.umbrella = agent;
    await waitFor(() => t.gw.registry.agents("umbrella").length === 1, 5000, "umbrella's agent");
    const r = await connectOnGatewayPort({ cert: bundleCert("umbrella") }, backend.address);
    expect(r.status).toBe(200);
    // Broken off: the caller reads an error (it closes then; a Node caller that ignores the
    // error is reset after BROKEN_TUNNEL_LINGER_MS).
    const broken = new Promise<string>((resolve) => {
      r.socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      r.socket.once("end", () => resolve("end"));
    });
    await store.run(["delete", "umbrella", "--yes"]);
    expect(BROKEN_TUNNEL_ERRORS).toContain(await broken);
    r.socket.destroy();
    await waitFor(() => t.gw.registry.agents("umbrella").length === 0, 2000, "umbrella's agent disconnected");
    expect((await connectOnGatewayPort({ cert: bundleCert("umbrella") }, backend.address)).status).toBe(401);
    // Nobody else was touched.
    expect(t.gw.registry.agents("acme")).toHaveLength(1);
    expect(t.gw.registry.agents("globex")).toHaveLength(1);
    expect(await metricValue("kgw_server_revoked_streams_total")).toBeGreaterThanOrEqual(3);
  });
});

async function metricValue(name: string): Promise<number> {
  const text = await t.gw.metrics.registry.metrics();
  let sum = 0;
  for (const line of text.split("\n")) {
    if (line.startsWith(`${name}{`) || line.startsWith(`${name} `)) sum += Number(line.split(" ").pop());
  }
  return sum;
}
