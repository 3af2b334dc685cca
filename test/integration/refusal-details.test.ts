/**
 * Refusals that explain themselves, on a running gateway in tenant mode, one path at a time as a
 * caller and an operator meet them: what the caller reads (status, headers, body on CONNECT; the
 * DIAL_RSP error or the call's status details over gRPC), the line the operator finds in the log
 * (tenant and credential named), and the dial's audit record (the rule or quota that refused).
 * Nothing of another tenant and no secret is in any of it.
 */

import { once } from "node:events";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { connect as tlsConnect } from "node:tls";
import { type ChannelCredentials, credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { GrpcCode } from "../../lib/errors.js";
import { dialRequest, PacketType } from "../../lib/proto/packet.js";
import { decodeRpcStatus, type RpcStatus } from "../../lib/proto/rpc-status.js";
import { FrameDecoder, TUNNEL_ALPN } from "../../lib/proto/tunnel-frames.js";
import type { DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import { parseToken } from "../../lib/tenancy/tokens.js";
import { encodeHello, parseServerAnswer, type ServerAnswer } from "../../lib/transport/tunnel-handshake.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { RawClient, tlsCredentials } from "../helpers/grpc-clients.js";
import { isType, PacketQueue } from "../helpers/packet-queue.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: HttpBackend;
let auditDir: string;
let auditFile: string;
let baseline: Map<string, number>;
const tenants: Record<string, CreatedTenant> = {};
const agents: RunningAgent[] = [];
const held = new Set<Socket>();

beforeAll(async () => {
  pki = await getTestPki();
  baseline = resources();
  store = makeTenantStore(pki);
  // acme: one tunnel at a time. initech: one dial a second. globex: 10.0.0.0/8 only, no agent
  // needed (the server refuses first). hooli: no agent. umbrella: its caller token revoked.
  tenants.acme = await store.create("acme");
  await store.run(["quota", "acme", "--max-tunnels=1"]);
  tenants.initech = await store.create("initech");
  await store.run(["quota", "initech", "--dial-rate=1", "--dial-burst=1"]);
  tenants.globex = await store.create("globex");
  await store.run(["policy", "globex", "--set", "10.0.0.0/8"]);
  tenants.hooli = await store.create("hooli");
  tenants.umbrella = await store.create("umbrella");
  // wayne: its caller token revoked while a gRPC call is open on it.
  tenants.wayne = await store.create("wayne");
  auditDir = mkdtempSync(path.join(tmpdir(), "kgw-refusals-"));
  auditFile = path.join(auditDir, "audit.log");
  t = await startTenantGateway(store.dir, [
    `--audit-log=${auditFile}`,
    "--tenant-watch-interval=200ms",
    "--tenant-max-agents=1",
    // Every refusal here must reach its answer, all from 127.0.0.1 (refusal-throttle.test.ts).
    "--refusal-throttle-threshold=0",
  ]);
  backend = await startHttpBackend();
  for (const id of ["acme", "initech"]) {
    const { agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
      `--agent-token=${tenants[id]!.agentToken}`,
      `--agent-id=${id}-agent`,
    ]);
    agents.push(agent);
  }
  await waitFor(() => t.gw.registry.size === 2, 5000, "the two agents");
});

afterAll(async () => {
  for (const s of held) s.destroy();
  for (const a of agents) await a.stop();
  await t?.gw.close();
  await backend?.close();
  store?.remove();
  if (auditDir) rmSync(auditDir, { recursive: true, force: true });
  await expectNoLeakedResources(baseline);
});

// ---------------------------------------------------------------------------------------------
// What the caller reads

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** CONNECT over TLS, read to the end: the status line, the headers and the body as sent. */
function rawConnect(target: string, token?: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({
      host: "127.0.0.1",
      port: t.gw.addresses.agent.port,
      servername: "localhost",
      ca: pki.ca.certPem,
      ALPNProtocols: ["http/1.1"],
    });
    const chunks: Buffer[] = [];
    socket.on("secureConnect", () => {
      const auth = token ? `Proxy-Authorization: Bearer ${token}\r\n` : "";
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
    });
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const split = text.indexOf("\r\n\r\n");
      if (split < 0) return reject(new Error(`no response head in ${JSON.stringify(text.slice(0, 200))}`));
      const [statusLine, ...lines] = text.slice(0, split).split("\r\n");
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(":");
        headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
      }
      resolve({ status: Number(statusLine!.split(" ")[1]), headers, body: text.slice(split + 4) });
    });
  });
}

/** A tunnel of `tenant` held open to the backend (its slot taken until the socket closes). */
async function holdTunnel(tenant: string): Promise<Socket> {
  const r = await connectOnGatewayPort(
    pki,
    t.gw.addresses.agent.port,
    { token: tenants[tenant]!.callerToken },
    backend.address,
  );
  held.add(r.socket);
  expect(r.status).toBe(200);
  return r.socket;
}

function callerCredentials(token?: string): ChannelCredentials {
  if (!token) return tlsCredentials(pki, "none");
  return credentials.combineChannelCredentials(
    credentials.createSsl(Buffer.from(pki.ca.certPem)),
    credentials.createFromMetadataGenerator((_params, cb) => {
      const md = new Metadata();
      md.set("authorization", `Bearer ${token}`);
      cb(null, md);
    }),
  );
}

/** A gRPC dial as `tenant`'s caller: the DIAL_RSP's error ("" when it was established). */
async function grpcDial(tenant: string, target: string): Promise<string> {
  const client = new RawClient(
    `127.0.0.1:${t.gw.addresses.agent.port}`,
    callerCredentials(tenants[tenant]!.callerToken),
  );
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

/** A ProxyService call refused as a whole: its status, message, kgw-* trailers and details. */
async function refusedCall(
  creds: ChannelCredentials,
  open: (c: RawClient) => NodeJS.EventEmitter = (c) => c.proxy(),
): Promise<{ code: number; message: string; trailers: Record<string, string>; details: RpcStatus }> {
  const client = new RawClient(`127.0.0.1:${t.gw.addresses.agent.port}`, creds);
  try {
    const err = await new Promise<ServiceError>((resolve) => open(client).once("error", resolve));
    const trailers: Record<string, string> = {};
    for (const key of ["kgw-error-code", "kgw-rule", "kgw-quota", "kgw-limit", "retry-after"]) {
      const v = err.metadata.get(key)[0];
      if (typeof v === "string") trailers[key] = v;
    }
    const bin = err.metadata.get("grpc-status-details-bin")[0];
    if (!Buffer.isBuffer(bin)) throw new Error("no grpc-status-details-bin");
    return { code: err.code, message: err.details, trailers, details: decodeRpcStatus(bin) };
  } finally {
    client.close();
  }
}

// ---------------------------------------------------------------------------------------------
// What the operator reads

type LogLine = Record<string, unknown> & { msg: string };

const logLines = (): LogLine[] => t.logs.map((l) => JSON.parse(l) as LogLine);

async function logLine(match: (l: LogLine) => boolean, what: string): Promise<LogLine> {
  await waitFor(() => logLines().some(match), 5000, what);
  return logLines().filter(match).at(-1)!;
}

function records(): DialAuditRecord[] {
  let text = "";
  try {
    text = readFileSync(auditFile, "utf8");
  } catch {
    return [];
  }
  return text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as DialAuditRecord);
}

async function recordOf(match: (r: DialAuditRecord) => boolean, what: string): Promise<DialAuditRecord> {
  await waitFor(() => records().some(match), 5000, what);
  return records().filter(match).at(-1)!;
}

const tokenId = (tenant: string) => parseToken(tenants[tenant]!.callerToken)!.tokenId;
const json = (body: string) => JSON.parse(body) as Record<string, unknown>;

/** No secret and no other tenant's name in what a caller of `tenant` was told. */
function tellsNothingElse(text: string, tenant?: string): void {
  for (const [id, c] of Object.entries(tenants)) {
    expect(text).not.toContain(c.callerToken);
    expect(text).not.toContain(c.agentToken);
    if (id !== tenant) expect(text).not.toContain(id);
  }
}

// ---------------------------------------------------------------------------------------------

describe("a CONNECT refusal names its reason to the caller and the operator", () => {
  it("no credential: 407 with Proxy-Authenticate, the code in a header and the body, a refused-caller line", async () => {
    const before = logLines().filter((l) => l.msg === "refused a caller").length;
    const r = await rawConnect(backend.address);
    expect(r.status).toBe(407);
    expect(r.headers["proxy-authenticate"]).toBe('Bearer realm="kgw"');
    expect(r.headers["x-kgw-error-code"]).toBe("ERR_PROXY_AUTH_REQUIRED");
    expect(r.headers["content-type"]).toBe("application/json");
    expect(Number(r.headers["content-length"])).toBe(Buffer.byteLength(r.body));
    expect(json(r.body)).toEqual({
      code: "ERR_PROXY_AUTH_REQUIRED",
      reason: expect.stringContaining("caller credential"),
    });
    tellsNothingElse(r.body + JSON.stringify(r.headers));
    await waitFor(
      () => logLines().filter((l) => l.msg === "refused a caller").length > before,
      5000,
      "the log line",
    );
    const line = logLines()
      .filter((l) => l.msg === "refused a caller")
      .at(-1)!;
    // Nobody to name: no credential was shown.
    expect(line).toMatchObject({ code: "ERR_PROXY_AUTH_REQUIRED", listener: "gateway" });
    expect(line.tenant).toBeUndefined();
  });

  it("a revoked caller token: 401 with one generic reason; the log names the tenant, the credential and why", async () => {
    await store.run(["revoke", "umbrella", tokenId("umbrella"), "--yes"]);
    let r: RawAnswer | undefined;
    await waitFor(
      async () => {
        r = await rawConnect(backend.address, tenants.umbrella!.callerToken);
        return r.status === 401;
      },
      5000,
      "the revocation applied",
    );
    expect(r!.headers["x-kgw-error-code"]).toBe("ERR_UNAUTHENTICATED");
    expect(json(r!.body)).toEqual({
      code: "ERR_UNAUTHENTICATED",
      reason: "invalid, expired or revoked credential",
    });
    // The caller is told nothing of whose credential it was, not even its own tenant's name.
    tellsNothingElse(r!.body + JSON.stringify(r!.headers));
    expect(r!.body).not.toContain("umbrella");
    const line = await logLine(
      (l) => l.msg === "refused a caller" && l.reason === "revoked",
      "the revoked line",
    );
    expect(line).toMatchObject({
      tenant: "umbrella",
      credential: `token:${tokenId("umbrella")}`,
      code: "ERR_UNAUTHENTICATED",
    });
    expect(JSON.stringify(line)).not.toContain(tenants.umbrella!.callerToken);
  });

  it("the egress policy: 403 naming the rule (no rule allows the target), in the log line and the audit record", async () => {
    const target = "192.0.2.10:443";
    const r = await rawConnect(target, tenants.globex!.callerToken);
    expect(r.status).toBe(403);
    expect(r.headers).toMatchObject({
      "x-kgw-error-code": "ERR_DESTINATION_NOT_ALLOWED",
      "x-kgw-rule": "no_rule",
    });
    expect(r.headers["retry-after"]).toBeUndefined();
    expect(json(r.body)).toEqual({
      code: "ERR_DESTINATION_NOT_ALLOWED",
      reason: `destination not allowed: no rule of the tenant's egress policy allows ${target}`,
      rule: "no_rule",
    });
    tellsNothingElse(r.body, "globex");
    const line = await logLine(
      (l) => l.msg === "CONNECT dial refused" && l.tenant === "globex",
      "the refusal line",
    );
    expect(line).toMatchObject({ principal: `token:${tokenId("globex")}`, rule: "no_rule", address: target });
    const rec = await recordOf((x) => x.tenant === "globex" && x.destination === target, "the record");
    expect(rec).toMatchObject({
      outcome: "denied",
      code: "ERR_DESTINATION_NOT_ALLOWED",
      rule: "no_rule",
      quota: null,
      limit: null,
    });
  });

  it("the egress policy's loopback check: 403 naming loopback, not a missing rule", async () => {
    const r = await rawConnect("127.0.0.1:9", tenants.globex!.callerToken);
    expect(r.status).toBe(403);
    expect(r.headers["x-kgw-rule"]).toBe("loopback");
    expect(json(r.body)).toMatchObject({
      rule: "loopback",
      reason: expect.stringContaining("does not allow loopback"),
    });
    const rec = await recordOf((x) => x.tenant === "globex" && x.destination === "127.0.0.1:9", "the record");
    expect(rec.rule).toBe("loopback");
  });

  it("maxTunnels: 429 with the quota, its limit and Retry-After; the log line and the record name them", async () => {
    const tunnel = await holdTunnel("acme");
    const target = `${backend.address}`;
    const r = await rawConnect(target, tenants.acme!.callerToken);
    tunnel.destroy();
    expect(r.status).toBe(429);
    expect(r.headers).toMatchObject({
      "x-kgw-error-code": "ERR_QUOTA",
      "x-kgw-quota": "maxTunnels",
      "x-kgw-limit": "1",
      "retry-after": "1",
    });
    expect(json(r.body)).toEqual({
      code: "ERR_QUOTA",
      reason: "tenant acme has 1 tunnels open, its quota (maxTunnels 1)",
      quota: "maxTunnels",
      limit: 1,
      retryAfterSeconds: 1,
    });
    tellsNothingElse(r.body, "acme");
    const line = await logLine(
      (l) => l.msg === "CONNECT dial refused" && l.tenant === "acme" && l.quota === "maxTunnels",
      "the refusal line",
    );
    expect(line).toMatchObject({ principal: `token:${tokenId("acme")}`, limit: 1, code: "ERR_QUOTA" });
    const rec = await recordOf((x) => x.tenant === "acme" && x.outcome === "denied", "the record");
    expect(rec).toMatchObject({ code: "ERR_QUOTA", quota: "maxTunnels", limit: 1, rule: null });
  });

  it("the dial rate: 429 with dialsPerSecond, its limit and a Retry-After the bucket computes", async () => {
    const first = await holdTunnel("initech");
    const r = await rawConnect(backend.address, tenants.initech!.callerToken);
    first.destroy();
    expect(r.status).toBe(429);
    expect(r.headers).toMatchObject({ "x-kgw-quota": "dialsPerSecond", "x-kgw-limit": "1" });
    // One token a second, just spent: a whole second until the next.
    expect(r.headers["retry-after"]).toBe("1");
    expect(json(r.body)).toMatchObject({ quota: "dialsPerSecond", limit: 1, retryAfterSeconds: 1 });
    const rec = await recordOf((x) => x.tenant === "initech" && x.outcome === "denied", "the record");
    expect(rec).toMatchObject({ quota: "dialsPerSecond", limit: 1 });
  });

  it("no agent: 503 ERR_NO_AGENT with the reason; the dial-failed line names tenant and credential", async () => {
    const r = await rawConnect(backend.address, tenants.hooli!.callerToken);
    expect(r.status).toBe(503);
    expect(r.headers["x-kgw-error-code"]).toBe("ERR_NO_AGENT");
    expect(json(r.body)).toMatchObject({ code: "ERR_NO_AGENT", reason: expect.any(String) });
    tellsNothingElse(r.body, "hooli");
    const line = await logLine(
      (l) => l.msg === "CONNECT dial failed" && l.tenant === "hooli",
      "the failure line",
    );
    expect(line).toMatchObject({ principal: `token:${tokenId("hooli")}`, code: "ERR_NO_AGENT" });
    const rec = await recordOf((x) => x.tenant === "hooli", "the record");
    expect(rec).toMatchObject({ outcome: "unavailable", code: "ERR_NO_AGENT", rule: null, quota: null });
  });
});

describe("a gRPC refusal carries the same", () => {
  it("a refused dial's DIAL_RSP keeps its message first and adds code and rule", async () => {
    const error = await grpcDial("globex", "192.0.2.11:443");
    expect(error).toBe(
      "destination not allowed: no rule of the tenant's egress policy allows 192.0.2.11:443 [kgw code=ERR_DESTINATION_NOT_ALLOWED rule=no_rule]",
    );
    const line = await logLine((l) => l.msg === "dial refused" && l.tenant === "globex", "the refusal line");
    expect(line).toMatchObject({ principal: `token:${tokenId("globex")}`, rule: "no_rule" });
    const rec = await recordOf((x) => x.destination === "192.0.2.11:443", "the record");
    expect(rec).toMatchObject({ frontend: "grpc", rule: "no_rule" });
  });

  it("a dial over a quota: the quota, its limit and retry-after in the DIAL_RSP; the record names them", async () => {
    const tunnel = await holdTunnel("acme");
    const error = await grpcDial("acme", backend.address);
    tunnel.destroy();
    expect(error).toBe(
      "tenant acme has 1 tunnels open, its quota (maxTunnels 1) [kgw code=ERR_QUOTA quota=maxTunnels limit=1 retry-after=1]",
    );
    const rec = await recordOf(
      (x) => x.tenant === "acme" && x.frontend === "grpc" && x.outcome === "denied",
      "the record",
    );
    expect(rec).toMatchObject({ quota: "maxTunnels", limit: 1 });
  });

  it("no agent: ERR_NO_AGENT in the DIAL_RSP; the dial-failed line names tenant and credential", async () => {
    const error = await grpcDial("hooli", backend.address);
    expect(error).toMatch(/ \[kgw code=ERR_NO_AGENT\]$/);
    const line = await logLine((l) => l.msg === "dial failed" && l.tenant === "hooli", "the failure line");
    expect(line).toMatchObject({ principal: `token:${tokenId("hooli")}`, code: "ERR_NO_AGENT" });
  });

  it("no credential: UNAUTHENTICATED with kgw-error-code and an ErrorInfo in grpc-status-details-bin", async () => {
    const r = await refusedCall(callerCredentials());
    expect(r.code).toBe(GrpcCode.UNAUTHENTICATED);
    expect(r.trailers).toEqual({ "kgw-error-code": "ERR_PROXY_AUTH_REQUIRED" });
    expect(r.details).toEqual({
      code: GrpcCode.UNAUTHENTICATED,
      message: r.message,
      errorInfo: { reason: "ERR_PROXY_AUTH_REQUIRED", domain: "kgw.dev", metadata: {} },
    });
  });

  it("a revoked credential: UNAUTHENTICATED, the generic message, the tenant only in the operator's log", async () => {
    const r = await refusedCall(callerCredentials(tenants.umbrella!.callerToken));
    expect(r.code).toBe(GrpcCode.UNAUTHENTICATED);
    expect(r.message).toBe("invalid, expired or revoked credential");
    expect(r.details.errorInfo?.reason).toBe("ERR_UNAUTHENTICATED");
    tellsNothingElse(JSON.stringify(r));
    expect(JSON.stringify(r)).not.toContain("umbrella");
  });

  it("a call whose credential is revoked while open ends UNAUTHENTICATED with the same details", async () => {
    const client = new RawClient(
      `127.0.0.1:${t.gw.addresses.agent.port}`,
      callerCredentials(tenants.wayne!.callerToken),
    );
    try {
      const call = client.proxy();
      const ended = new Promise<ServiceError>((resolve) => call.once("error", resolve));
      const packets = new PacketQueue(call);
      // A dial answered (refused by the policy) is a call the gateway accepted.
      call.write(dialRequest("169.254.169.254:80", 1n));
      expect((await packets.next(isType(PacketType.DIAL_RSP))).error).toContain("rule=link_local]");
      await store.run(["revoke", "wayne", tokenId("wayne"), "--yes"]);
      const err = await ended;
      expect(err.code).toBe(GrpcCode.UNAUTHENTICATED);
      expect(err.details).toBe(
        "the credential this connection was authenticated with is no longer valid (revoked)",
      );
      expect(err.metadata.get("kgw-error-code")).toEqual(["ERR_UNAUTHENTICATED"]);
      const bin = err.metadata.get("grpc-status-details-bin")[0] as Buffer;
      expect(decodeRpcStatus(bin)).toMatchObject({
        code: GrpcCode.UNAUTHENTICATED,
        message: err.details,
        errorInfo: { reason: "ERR_UNAUTHENTICATED", domain: "kgw.dev" },
      });
      const line = await logLine(
        (l) => l.msg === "closed what a credential that is no longer valid had open" && l.tenant === "wayne",
        "the revocation line",
      );
      expect(line).toMatchObject({ credential: `token:${tokenId("wayne")}`, reason: "revoked" });
    } finally {
      client.close();
    }
  });

  it("an agent over maxAgents: RESOURCE_EXHAUSTED with QuotaFailure, RetryInfo and the limit; the log names the tenant", async () => {
    const r = await refusedCall(tlsCredentials(pki, "none"), (c) => {
      const call = c.connect({
        agentid: "acme-agent-2",
        authorization: `Bearer ${tenants.acme!.agentToken}`,
      });
      call.on("data", () => {});
      return call;
    });
    expect(r.code).toBe(GrpcCode.RESOURCE_EXHAUSTED);
    expect(r.trailers).toEqual({
      "kgw-error-code": "ERR_QUOTA",
      "kgw-quota": "maxAgents",
      "kgw-limit": "1",
      "retry-after": "1",
    });
    expect(r.details).toMatchObject({
      code: GrpcCode.RESOURCE_EXHAUSTED,
      errorInfo: { reason: "ERR_QUOTA", domain: "kgw.dev", metadata: { quota: "maxAgents", limit: "1" } },
      quotaFailure: [{ subject: "maxAgents", description: "limit 1" }],
      retryDelaySeconds: 1,
    });
    const line = await logLine(
      (l) => l.msg === "agent stream refused" && l.quota === "maxAgents",
      "the refusal line",
    );
    expect(line).toMatchObject({ tenant: "acme", limit: 1 });
  });

  it("an agent over maxAgents on kgw-tunnel/1: the refusal's message ends with the same details", async () => {
    const s = tlsConnect({
      host: "127.0.0.1",
      port: t.gw.addresses.agent.port,
      servername: "localhost",
      ca: pki.ca.certPem,
      ALPNProtocols: [TUNNEL_ALPN],
    });
    held.add(s);
    s.on("error", () => {});
    await once(s, "secureConnect");
    s.write(
      encodeHello({ agentid: ["acme-agent-3"], authorization: [`Bearer ${tenants.acme!.agentToken}`] }),
    );
    const answer = await new Promise<ServerAnswer>((resolve, reject) => {
      const d = new FrameDecoder();
      s.on("data", (chunk: Buffer) => {
        d.push(chunk);
        const f = d.next();
        if (f?.kind === "frame") resolve(parseServerAnswer(f));
      });
      s.once("close", () => reject(new Error("closed without an answer")));
    });
    s.destroy();
    expect(answer).toMatchObject({
      kind: "refused",
      code: GrpcCode.RESOURCE_EXHAUSTED,
      message:
        "tenant acme has 1 agents connected here, its quota (maxAgents 1) [kgw code=ERR_QUOTA quota=maxAgents limit=1 retry-after=1]",
    });
  });
});
