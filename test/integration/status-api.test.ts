/**
 * The status model on one gateway in tenant mode, as an operator and a tenant read it: the admin
 * port's `GET /status` and `GET /status/tenants/<id>` (where each agent is, what each tenant's
 * dials did, which credentials were used when), and a tenant's own `GET /v1/status` on the
 * gateway port, tried as an attacker would: no credential, another tenant's, an agent's, a
 * revoked one, malformed, oversized and slow requests. No answer may name another tenant or
 * carry a secret.
 */
import { readFileSync } from "node:fs";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { FleetStatus, TenantStatus } from "../../lib/server/status/status-model.js";
import { KGW_VERSION } from "../../lib/tenancy/manifest/images.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { bodyText, httpOver } from "../helpers/connect-client.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let backend: HttpBackend;
let baseline: Map<string, number>;
const tenants: Record<string, CreatedTenant> = {};
const agents: RunningAgent[] = [];
const sockets: TLSSocket[] = [];

/** The token id a `kgw_<kind>_<tenant>_<id>_<secret>` token names. */
const tokenId = (token: string) => token.split("_")[3]!;
/** The secret part of a token: what must never appear in an answer. */
const secretOf = (token: string) => token.split("_")[4]!;

async function admin(path: string, method = "GET"): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://${t.admin}${path}`, { method });
  return { status: res.status, body: await res.text() };
}

interface Answer {
  status: number;
  head: string;
  body: string;
}

/** Raw bytes over TLS (ALPN http/1.1) to the gateway port, and what it answers until it closes. */
function exchange(request: string | Buffer, opts: { cert?: { certPem: Buffer; keyPem: Buffer } } = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const s = tlsConnect({
      host: "127.0.0.1",
      port: t.gw.addresses.agent.port,
      ca: pki.ca.certPem,
      servername: "localhost",
      ALPNProtocols: ["http/1.1"],
      ...(opts.cert ? { cert: opts.cert.certPem, key: opts.cert.keyPem } : {}),
    });
    sockets.push(s);
    const chunks: Buffer[] = [];
    s.on("data", (c: Buffer) => chunks.push(c));
    s.on("error", () => {}); // a reset after the answer is not what these tests look at
    s.once("secureConnect", () => s.write(request));
    s.once("close", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const split = text.indexOf("\r\n\r\n");
      const head = split === -1 ? text : text.slice(0, split);
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ?? 0),
        head,
        body: text.slice(split + 4),
      });
    });
    s.once("timeout", () => reject(new Error("no answer")));
  });
}

const selfStatus = (auth?: string, extra = "") =>
  `GET /v1/status HTTP/1.1\r\nHost: localhost\r\n${auth ? `Authorization: ${auth}\r\n` : ""}${extra}\r\n`;

const bundleCert = (id: string) => ({
  certPem: readFileSync(tenants[id]!.bundleFiles.clientCert!),
  keyPem: readFileSync(tenants[id]!.bundleFiles.clientKey!),
});

beforeAll(async () => {
  baseline = resources();
  pki = await getTestPki();
  store = makeTenantStore(pki);
  tenants.acme = await store.create("acme");
  tenants.globex = await store.create("globex");
  tenants.initech = await store.create("initech");
  t = await startTenantGateway(store.dir, ["--header-timeout=1s", "--max-header-bytes=2048"]);
  backend = await startHttpBackend();
  for (const id of ["acme", "globex"]) {
    const { agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
      `--agent-token=${tenants[id]!.agentToken}`,
      `--agent-id=${id}-agent`,
    ]);
    agents.push(agent);
  }
  await waitFor(() => t.gw.registry.size === 2, 5000, "both agents connected");
  // acme: one dial that works, one its egress policy refuses (cloud metadata).
  const ok = await connectOnGatewayPort(
    pki,
    t.gw.addresses.agent.port,
    { token: tenants.acme!.callerToken },
    backend.address,
  );
  expect(ok.status).toBe(200);
  expect(await bodyText(await httpOver(ok.socket, "/hello"))).toBe("hello from the backend");
  ok.socket.destroy();
  const denied = await connectOnGatewayPort(
    pki,
    t.gw.addresses.agent.port,
    { token: tenants.acme!.callerToken },
    "169.254.169.254:80",
  );
  expect(denied.status).toBe(403);
  denied.socket.destroy();
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const a of agents) await a.stop();
  await t?.gw.close();
  await backend?.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

describe("the admin port's status API", () => {
  it("GET /status lists this instance and every tenant with its agents, versioned", async () => {
    const r = await admin("/status");
    expect(r.status).toBe(200);
    const s = JSON.parse(r.body) as FleetStatus;
    expect(s.apiVersion).toBe("kgw.status/v1");
    expect(s.partial).toBe(false);
    expect(s.instances).toHaveLength(1);
    expect(s.instances[0]).toMatchObject({ lease: "none", answered: true, agents: 2, version: KGW_VERSION });
    const byId = Object.fromEntries(s.tenants.map((x) => [x.tenant, x]));
    expect(byId.acme).toMatchObject({ agents: 1, instances: [s.answeredBy] });
    expect(byId.globex).toMatchObject({ agents: 1, instances: [s.answeredBy] });
    expect(byId.acme!.recent.dials).toMatchObject({ ok: 1, denied: 1 });
    expect(byId.acme!.lastError?.code).toBe("ERR_DESTINATION_NOT_ALLOWED");
  });

  it("GET /status/tenants/acme shows the agent where it is, its dials by reason and its credentials' last use", async () => {
    const r = await admin("/status/tenants/acme");
    expect(r.status).toBe(200);
    const s = JSON.parse(r.body) as TenantStatus;
    const [agent, ...others] = s.tenant.agents;
    expect(others).toEqual([]);
    expect(agent).toMatchObject({
      agentId: "acme-agent",
      instance: s.answeredBy,
      transport: "tunnel",
      agentVersion: KGW_VERSION,
      responsive: true,
    });
    expect(agent!.remoteAddress).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(Date.parse(agent!.connectedSince!)).toBeLessThanOrEqual(Date.parse(agent!.lastSeen));
    expect(s.tenant.recent.failures).toEqual({ ERR_DESTINATION_NOT_ALLOWED: 1 });
    expect(s.tenant.lastError).toMatchObject({ outcome: "denied", instance: s.answeredBy });
    expect(s.tenant.lastError?.dialId).toMatch(/^[0-9a-f-]{36}$/);
    const creds = Object.fromEntries(s.tenant.credentials.map((c) => [c.id, c.role]));
    expect(creds).toMatchObject({
      [`token:${tokenId(tenants.acme!.agentToken)}`]: "agent",
      [`token:${tokenId(tenants.acme!.callerToken)}`]: "caller",
    });
    expect(r.body).not.toContain("globex");
    for (const tok of [tenants.acme!.agentToken, tenants.acme!.callerToken])
      expect(r.body).not.toContain(secretOf(tok));
  });

  it("a tenant with nothing here answers empty; a bad or missing id 400, another path 404, POST 405", async () => {
    const empty = JSON.parse((await admin("/status/tenants/initech")).body) as TenantStatus;
    expect(empty.tenant).toMatchObject({ tenant: "initech", agents: [], openTunnels: 0, lastError: null });
    expect((await admin("/status/tenants/Not_A-Label!")).status).toBe(400);
    expect((await admin(`/status/tenants/${"a".repeat(200)}`)).status).toBe(400);
    expect((await admin("/status/tenants/")).status).toBe(400);
    expect((await admin("/status/tenant/acme")).status).toBe(404);
    expect((await admin("/status", "POST")).status).toBe(405);
  });
});

describe("the admin port's status page", () => {
  it("GET /ui and /ui/tenants/acme: HTML of the same status, strict headers; bad ids and paths as the JSON's", async () => {
    const fleet = await fetch(`http://${t.admin}/ui`);
    expect(fleet.status).toBe(200);
    expect(fleet.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(fleet.headers.get("content-security-policy")).toMatch(/^default-src 'none'; style-src 'sha256-/);
    expect(fleet.headers.get("x-content-type-options")).toBe("nosniff");
    expect(fleet.headers.get("cache-control")).toBe("no-store");
    const page = await fleet.text();
    for (const id of ["acme", "globex"]) expect(page).toContain(`<a href="/ui/tenants/${id}">${id}</a>`);
    const acme = await (await fetch(`http://${t.admin}/ui/tenants/acme`)).text();
    expect(acme).toMatch(/<tr class="agent up" data-agent="acme-agent" data-instance="[^"]+">/);
    expect(acme).toContain(`data-credential="token:${tokenId(tenants.acme!.callerToken)}"`);
    expect(acme).toContain("ERR_DESTINATION_NOT_ALLOWED 1");
    expect(acme).not.toContain("globex");
    const bad = await fetch(`http://${t.admin}/ui/tenants/Not_A-Label!`);
    expect(bad.status).toBe(400);
    expect(await bad.text()).toContain("ERR_BAD_REQUEST");
    expect((await admin("/ui/tenant/acme")).status).toBe(404);
    expect((await admin("/nothing-here")).status).toBe(404);
    const root = await fetch(`http://${t.admin}/`, { redirect: "manual" });
    expect([root.status, root.headers.get("location")]).toEqual([303, "/ui"]);
  });
});

describe("a tenant's own GET /v1/status on the gateway port", () => {
  it("with its caller token: its own agents and failures, nothing of another tenant, no secret", async () => {
    const r = await exchange(selfStatus(`Bearer ${tenants.acme!.callerToken}`));
    expect(r.status).toBe(200);
    expect(r.head).toMatch(/cache-control: no-store/i);
    const s = JSON.parse(r.body) as { apiVersion: string; tenant: TenantStatus["tenant"] };
    expect(s.apiVersion).toBe("kgw.status/v1");
    expect(s.tenant.tenant).toBe("acme");
    expect(s.tenant.agents.map((a) => a.agentId)).toEqual(["acme-agent"]);
    expect(s.tenant.recent.failures).toEqual({ ERR_DESTINATION_NOT_ALLOWED: 1 });
    expect(r.body).not.toContain("globex");
    expect(r.body).not.toContain("peerAddress");
    for (const tok of Object.values(tenants).flatMap((x) => [x.agentToken, x.callerToken]))
      expect(r.body).not.toContain(secretOf(tok));
  });

  it("with its bundle's client certificate: its own status", async () => {
    const r = await exchange(selfStatus(), { cert: bundleCert("globex") });
    expect(r.status).toBe(200);
    const s = JSON.parse(r.body) as { tenant: TenantStatus["tenant"] };
    expect(s.tenant.tenant).toBe("globex");
    expect(s.tenant.agents.map((a) => a.agentId)).toEqual(["globex-agent"]);
    expect(r.body).not.toContain("acme");
  });

  it("another tenant's token sees only that tenant", async () => {
    const r = await exchange(selfStatus(`Bearer ${tenants.initech!.callerToken}`));
    expect(r.status).toBe(200);
    const s = JSON.parse(r.body) as { tenant: TenantStatus["tenant"] };
    expect(s.tenant).toMatchObject({ tenant: "initech", agents: [] });
    expect(r.body).not.toMatch(/acme|globex/);
  });

  it.each([
    ["no credential", undefined],
    ["an agent token (agents are not callers)", () => `Bearer ${tenants.acme!.agentToken}`],
    ["a token that does not exist", () => `Bearer kgw_caller_acme_0123456789abcdef_${"0".repeat(64)}`],
    ["a Basic credential", () => "Basic YWNtZTpwYXNzd29yZA=="],
    ["garbage", () => "Bearer not-a-token"],
  ])("%s: 401, saying what is needed, naming no tenant", async (_what, auth) => {
    const r = await exchange(selfStatus(auth?.()));
    expect(r.status).toBe(401);
    expect(r.head).toMatch(/x-kgw-error-code: ERR_UNAUTHENTICATED/i);
    expect(r.head).toMatch(/www-authenticate: Bearer/i);
    expect(r.body).not.toMatch(/acme|globex|initech/);
  });

  it("a revoked caller token is refused", async () => {
    const token = tenants.initech!.callerToken;
    expect((await exchange(selfStatus(`Bearer ${token}`))).status).toBe(200);
    await store.run(["revoke", "initech", tokenId(token), "--yes"]);
    await waitFor(
      async () => (await exchange(selfStatus(`Bearer ${token}`))).status === 401,
      5000,
      "the revoked token refused",
    );
  });

  it("two Authorization headers, a body, an oversized head: 400, 400, 431", async () => {
    const token = `Bearer ${tenants.acme!.callerToken}`;
    expect((await exchange(selfStatus(token, `Authorization: ${token}\r\n`))).status).toBe(400);
    expect(
      (await exchange(selfStatus(token, "Content-Length: 5\r\n").replace(/\r\n$/, "\r\nhello"))).status,
    ).toBe(400);
    expect((await exchange(selfStatus(token, `X-Pad: ${"x".repeat(4096)}\r\n`))).status).toBe(431);
  });

  it("a head that never ends is answered 408 and closed, not held", async () => {
    const r = await exchange(
      `GET /v1/status HTTP/1.1\r\nAuthorization: Bearer ${tenants.acme!.callerToken}\r\n`,
    );
    expect(r.status).toBe(408);
  });

  it("another path is 404 (no install route on this gateway)", async () => {
    const r = await exchange(
      `GET /v1/statuses HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${tenants.acme!.callerToken}\r\n\r\n`,
    );
    expect(r.status).toBe(404);
  });

  it("no log line carries a token's secret, whatever was refused", () => {
    const logged = t.logs.join("\n");
    for (const tok of Object.values(tenants).flatMap((x) => [x.agentToken, x.callerToken]))
      expect(logged).not.toContain(secretOf(tok));
    expect(logged).toContain("refused a tenant status request");
  });
});
