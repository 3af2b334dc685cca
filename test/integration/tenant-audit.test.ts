/**
 * The audit trail and per-tenant observability of a gateway in tenant mode, as an operator runs
 * it: `--audit-log` to a file, tenants made with `kgw tenant`, callers with the bundle's
 * certificate or a caller token. acme has an agent, globex has none. Each dial must leave exactly
 * one record, written when its tunnel ends, with the exact bytes each way; a caller refused at
 * authentication leaves none; no secret ever reaches the file. The per-tenant metrics are bounded
 * (--tenant-metrics-limit=1: acme, seen first, keeps its label; globex is "_other"), and the admin
 * port answers readiness per tenant.
 *
 * The tenants' egress policy keeps them off the agent host's loopback, where the backends are:
 * so the agent resolves every *.test name to TEST-NET-1 (192.0.2.1, which the policy allows) and
 * its socket factory stands in for the network, connecting to the loopback port instead.
 */
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Duplex } from "node:stream";
import { credentials, Metadata } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { HostResolver } from "../../lib/agent/host-resolver.js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import type { DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import { OTHER_TENANTS } from "../../lib/server/audit/tenant-metrics.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { closedPort } from "../helpers/backends.js";
import { AGENT_TOKEN, startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { spawnKgwAnnouncing } from "../helpers/kgw-process.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

const SERVER_ID = "gw-audit-1";
/** What each caller sends, and what the backend answers once it has all of it. */
const UP = 12_345;
const DOWN = 300_001;

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: ExactBackend;
let agent: RunningAgent | undefined;
let auditDir: string;
let auditFile: string;
let baseline: Map<string, number>;
const tenants: Record<string, CreatedTenant> = {};

// ---------------------------------------------------------------------------------------------
// Backend, agent, callers

interface ExactBackend {
  port: number;
  close(): Promise<void>;
}

/** Reads exactly UP bytes, then answers DOWN bytes and closes: both counts are known. */
async function startExactBackend(): Promise<ExactBackend> {
  const open = new Set<Socket>();
  const server: Server = createServer((s) => {
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    let got = 0;
    s.on("data", (chunk: Buffer) => {
      got += chunk.length;
      if (got === UP) s.end(Buffer.alloc(DOWN, 0x61));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

const resolveHost: HostResolver = async (host) => {
  if (host.endsWith(".test")) return [{ address: "192.0.2.1", family: 4 }];
  throw new Error(`getaddrinfo ENOTFOUND ${host}`);
};

/** Handles and requests alive in this process, by kind, for the leak check. */
beforeAll(async () => {
  pki = await getTestPki();
  baseline = resources();
  store = makeTenantStore(pki);
  tenants.acme = await store.create("acme");
  tenants.globex = await store.create("globex");
  auditDir = mkdtempSync(path.join(tmpdir(), "kgw-audit-"));
  auditFile = path.join(auditDir, "audit.log");
  t = await startTenantGateway(store.dir, [
    `--audit-log=${auditFile}`,
    `--server-id=${SERVER_ID}`,
    "--tenant-metrics-limit=1",
  ]);
  backend = await startExactBackend();
  ({ agent } = await startTestAgent(
    pki,
    t.gw.addresses.agent.port,
    [`--agent-token=${tenants.acme!.agentToken}`, "--agent-id=acme-agent"],
    {
      resolveHost,
      connectSocket: ({ port }) => netConnect({ host: "127.0.0.1", port }),
    },
  ));
  await waitFor(() => t.gw.registry.agents("acme").length === 1, 5000, "acme's agent connected");
});

afterAll(async () => {
  await agent?.stop();
  await t?.gw.close();
  await backend?.close();
  store?.remove();
  if (auditDir) rmSync(auditDir, { recursive: true, force: true });
  // Everything a test opened must be gone: sockets, servers, timers.
  await expectNoLeakedResources(baseline);
});

interface Caller {
  cert?: { certPem: Buffer; keyPem: Buffer };
  token?: string;
}

function bundleCert(id: string) {
  const files = tenants[id]!.bundleFiles;
  return { certPem: readFileSync(files.clientCert!), keyPem: readFileSync(files.clientKey!) };
}

/** CONNECT on the one gateway port; resolves with the status and, on 200, the tunnel. */
function connectTo(caller: Caller, target: string): Promise<{ status: number; socket: Socket }> {
  return connectOnGatewayPort(pki, t.gw.addresses.agent.port, caller, target);
}

/** A gRPC caller on the gateway port showing `token` as authorization metadata. */
function grpcCaller(token: string): TunnelClient {
  return new TunnelClient(
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
}

/** Sends UP bytes and counts what comes back until the tunnel ends. */
function exchange(tunnel: Duplex): Promise<number> {
  return new Promise((resolve, reject) => {
    let received = 0;
    tunnel.on("data", (c: Buffer) => {
      received += c.length;
    });
    tunnel.once("end", () => resolve(received));
    tunnel.once("error", reject);
    tunnel.write(Buffer.alloc(UP, 0x62));
  });
}

/** A caller token with its secret changed: well-formed, refused. */
function tampered(token: string): string {
  const last = token.at(-1) === "0" ? "1" : "0";
  return `${token.slice(0, -1)}${last}`;
}

// ---------------------------------------------------------------------------------------------
// Reading what the gateway wrote

function records(file = auditFile): DialAuditRecord[] {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as DialAuditRecord);
}

async function recordFor(destination: string): Promise<DialAuditRecord> {
  await waitFor(() => records().some((r) => r.destination === destination), 5000, `record of ${destination}`);
  const found = records().filter((r) => r.destination === destination);
  expect(found).toHaveLength(1);
  return found[0]!;
}

async function httpGet(address: string, p: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://${address}${p}`);
  return { status: res.status, body: await res.text() };
}

async function metricLines(): Promise<string[]> {
  return (await httpGet(t.admin, "/metrics")).body.split("\n").filter((l) => l.startsWith("kgw_tenant_"));
}

// ---------------------------------------------------------------------------------------------

describe("one audit record per dial", () => {
  it("a CONNECT tunnel's record has the exact bytes each way, and is written when the tunnel ends", async () => {
    const destination = `connect.test:${backend.port}`;
    const r = await connectTo({ cert: bundleCert("acme") }, destination);
    expect(r.status).toBe(200);
    await waitFor(
      async () => (await metricLines()).includes('kgw_tenant_tunnels_open{tenant="acme"} 1'),
      5000,
      "the open tunnel counted",
    );
    expect(records().filter((x) => x.destination === destination)).toEqual([]);
    expect(await exchange(r.socket)).toBe(DOWN);
    const rec = await recordFor(destination);
    expect(rec).toMatchObject({
      tenant: "acme",
      listener: "gateway",
      frontend: "connect",
      instance: SERVER_ID,
      agentId: "acme-agent",
      destination,
      outcome: "ok",
      code: null,
      bytesFromCaller: UP,
      bytesToCaller: DOWN,
    });
    expect(rec.principal).toMatch(/^cert:.+#[0-9A-F]+$/);
    expect(rec.principal.toLowerCase()).toContain(
      tenants.acme!.callerSerial.toLowerCase().replace(/^0+/, ""),
    );
    expect(rec.dialMs).toBeGreaterThanOrEqual(0);
    expect(rec.durationMs).toBeGreaterThanOrEqual(rec.dialMs);
    expect(Date.now() - Date.parse(rec.time)).toBeLessThan(60_000);
  });

  it("a gRPC tunnel's record names the caller token by its id, with the exact bytes each way", async () => {
    const destination = `grpc.test:${backend.port}`;
    const token = tenants.acme!.callerToken;
    const client = grpcCaller(token);
    try {
      expect(await exchange(await client.dial(destination))).toBe(DOWN);
    } finally {
      client.close();
    }
    expect(await recordFor(destination)).toMatchObject({
      tenant: "acme",
      principal: `token:${token.split("_")[3]}`,
      listener: "gateway",
      frontend: "grpc",
      agentId: "acme-agent",
      outcome: "ok",
      code: null,
      bytesFromCaller: UP,
      bytesToCaller: DOWN,
    });
  });

  it("a dial to a backend that refuses the connection is refused (502), with the agent that tried", async () => {
    const destination = `closed.test:${await closedPort()}`;
    const r = await connectTo({ token: tenants.acme!.callerToken }, destination);
    expect(r.status).toBe(502);
    expect(await recordFor(destination)).toMatchObject({
      tenant: "acme",
      agentId: "acme-agent",
      outcome: "refused",
      code: "ERR_DIAL_FAILED",
      bytesFromCaller: 0,
      bytesToCaller: 0,
    });
  });

  it("a dial of a tenant with no agent is unavailable (503), with no agent", async () => {
    const destination = "nobody.test:443";
    const r = await connectTo({ token: tenants.globex!.callerToken }, destination);
    expect(r.status).toBe(503);
    expect(await recordFor(destination)).toMatchObject({
      tenant: "globex",
      agentId: null,
      outcome: "unavailable",
      code: "ERR_NO_AGENT",
    });
  });

  it("a caller refused at authentication leaves no record (it is in the server log and rejected-connections metric)", async () => {
    const wrong = tampered(tenants.acme!.callerToken);
    expect((await connectTo({ token: wrong }, "wrong.test:1")).status).toBe(401);
    const client = grpcCaller(wrong);
    try {
      await expect(client.dial("wrong.test:2")).rejects.toThrow();
    } finally {
      client.close();
    }
    // A dial after them, recorded: anything the refused callers caused would be written before it.
    expect((await connectTo({ token: tenants.globex!.callerToken }, "marker.test:1")).status).toBe(503);
    await recordFor("marker.test:1");
    expect(records().filter((r) => r.destination.startsWith("wrong.test"))).toEqual([]);
    expect(t.logs.some((l) => l.includes("refused a caller"))).toBe(true);
  });

  it("holds no secret: no token, no token secret, no header", async () => {
    const text = readFileSync(auditFile, "utf8");
    const secrets = [tenants.acme!, tenants.globex!].flatMap((x) => [x.callerToken, x.agentToken]);
    for (const token of [...secrets, tampered(tenants.acme!.callerToken)]) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(token.split("_")[4]!);
    }
    expect(text).not.toMatch(/bearer|authorization/i);
    // Every line is one of our records, and nothing else.
    for (const r of records()) {
      expect(Object.keys(r).sort()).toEqual(
        [
          "agentId",
          "bytesFromCaller",
          "bytesToCaller",
          "code",
          "destination",
          "dialId",
          "dialMs",
          "durationMs",
          "frontend",
          "instance",
          "limit",
          "listener",
          "outcome",
          "owner",
          "principal",
          "quota",
          "rule",
          "tenant",
          "time",
        ].sort(),
      );
    }
  });
});

describe("per-tenant metrics and readiness", () => {
  it("count each tenant's dials, bytes, tunnels and agents, beyond the limit as _other", async () => {
    const lines = await metricLines();
    expect(lines).toEqual(
      expect.arrayContaining([
        'kgw_tenant_dials_total{tenant="acme",outcome="ok"} 2',
        'kgw_tenant_dials_total{tenant="acme",outcome="refused"} 1',
        `kgw_tenant_dials_total{tenant="${OTHER_TENANTS}",outcome="unavailable"} 2`,
        `kgw_tenant_bytes_total{tenant="acme",direction="to_agent"} ${2 * UP}`,
        `kgw_tenant_bytes_total{tenant="acme",direction="to_client"} ${2 * DOWN}`,
        'kgw_tenant_tunnels_open{tenant="acme"} 0',
        'kgw_tenant_agents{tenant="acme"} 1',
      ]),
    );
    expect(lines.filter((l) => l.includes('tenant="globex"'))).toEqual([]);
  });

  it("the admin port answers readiness per tenant; the health port does not", async () => {
    expect(await httpGet(t.admin, "/readyz?tenant=acme")).toEqual({
      status: 200,
      body: "tenant acme: ready: 1 agent connected and answering\n",
    });
    expect(await httpGet(t.admin, "/readyz?tenant=globex")).toEqual({
      status: 503,
      body: "tenant globex: not ready: no agent connected to this instance\n",
    });
    expect((await httpGet(t.admin, "/readyz?tenant=Not_A_Tenant")).status).toBe(400);
    expect((await httpGet(t.admin, "/readyz?tenant=acme&tenant=globex")).status).toBe(400);
    expect((await httpGet(t.health, "/readyz?tenant=acme")).status).toBe(404);
    expect(await httpGet(t.health, "/readyz")).toEqual({ status: 200, body: "ok\n" });
  });

  it("a tenant whose agent leaves is not ready, and has no agents", async () => {
    await agent!.stop();
    agent = undefined;
    await waitFor(
      async () => (await httpGet(t.admin, "/readyz?tenant=acme")).status === 503,
      5000,
      "acme not ready",
    );
    expect((await httpGet(t.admin, "/readyz?tenant=acme")).body).toBe(
      "tenant acme: not ready: no agent connected to this instance\n",
    );
    expect(await metricLines()).toContain('kgw_tenant_agents{tenant="acme"} 0');
  });
});

describe("kgw server as a process", () => {
  it("the drop-in audits its dials as tenant default, and reopens the file on SIGHUP", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "kgw-audit-proc-"));
    const file = path.join(dir, "audit.log");
    const socketPath = path.join(dir, "kgw.sock");
    const kgw = spawnKgwAnnouncing([
      "server",
      `--uds-name=${socketPath}`,
      `--cluster-cert=${pki.files.serverCert}`,
      `--cluster-key=${pki.files.serverKey}`,
      `--agent-token=${AGENT_TOKEN}`,
      "--agent-port=0",
      "--agent-bind-address=127.0.0.1",
      "--admin-port=0",
      "--health-port=0",
      "--health-bind-address=127.0.0.1",
      `--audit-log=${file}`,
    ]);
    /** A CONNECT on the Unix socket; no agent is connected, so each is answered 503. */
    const dialOverUds = (target: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = netConnect(socketPath);
        let head = "";
        socket.on("data", (c: Buffer) => {
          head += c.toString();
        });
        socket.once("close", () => resolve(head));
        socket.once("error", reject);
        socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
      });
    try {
      // Listening once it has announced its ports: the Unix socket is bound before those.
      const health = `127.0.0.1:${(await kgw.ports()).health}`;
      expect(await httpGet(health, "/healthz")).toMatchObject({ status: 200 });
      expect(await dialOverUds("first.test:1")).toMatch(/^HTTP\/1\.1 503 /);
      await waitFor(() => records(file).length === 1, 5000, "first record");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(records(file)[0]).toMatchObject({
        tenant: "default",
        principal: "uds",
        listener: "uds",
        frontend: "connect",
        destination: "first.test:1",
        outcome: "unavailable",
        code: "ERR_NO_AGENT",
      });
      renameSync(file, `${file}.1`);
      kgw.child.kill("SIGHUP");
      // Reopened: the file it appends to is there again, created anew.
      await waitFor(() => existsSync(file), 5000, "audit log reopened");
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(await dialOverUds("second.test:2")).toMatch(/^HTTP\/1\.1 503 /);
      await waitFor(() => records(file).length === 1, 5000, "record in the new file");
      expect(records(file)[0]!.destination).toBe("second.test:2");
      expect(records(`${file}.1`).map((r) => r.destination)).toEqual(["first.test:1"]);
      // The server log is not the audit log: no record went to stdout.
      expect(kgw.output.join("")).not.toContain('"outcome"');
    } finally {
      kgw.child.kill("SIGTERM");
      expect((await kgw.exited).code).toBe(0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
