/**
 * The one-line agent install, as an operator and a tenant would use it: `kgw tenant
 * install-token` on the store of a tenant-mode gateway, then the link fetched over HTTPS from the
 * gateway port exactly as kubectl (Node's https.get with the test CA) and curl (`curl --cacert
 * … -fsSL`) would. The manifest must hold an agent token that authenticates as the tenant's
 * agent; the link must work once, expire, refuse what it should, and never leak its secret.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import { authenticateToken } from "../../lib/tenancy/verify.js";
import { waitFor } from "../helpers/agent.js";
import { closedPort } from "../helpers/backends.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

/** What the installed agents dial: not the test's address, to show the manifest takes the flag's. */
const INSTALL_ADDRESS = "kgw.example.test:8132";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let ca: Buffer;
let baseline: Map<string, number>;
const sockets: TLSSocket[] = [];

interface Fetched {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** GET over HTTPS as kubectl does: verify the gateway with the CA, no client certificate. */
function fetchUrl(url: string): Promise<Fetched> {
  return new Promise((resolve, reject) => {
    const req = httpsGet(url, { ca, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          headers: res.headers,
          body: Buffer.concat(chunks).toString("utf8"),
        }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
  });
}

/**
 * Raw bytes over TLS (ALPN http/1.1) and everything the gateway answers until it closes; to the
 * gateway port unless another port is given.
 */
function exchange(
  write: (s: TLSSocket) => void,
  timeoutMs = 10_000,
  port = t.gw.addresses.agent.port,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({
      host: "127.0.0.1",
      port,
      ca,
      servername: "localhost",
      ALPNProtocols: ["http/1.1"],
    });
    sockets.push(s);
    let got = "";
    const timer = setTimeout(
      () => reject(new Error(`no close within ${timeoutMs}ms; got ${got}`)),
      timeoutMs,
    );
    s.on("secureConnect", () => write(s));
    s.on("data", (c: Buffer) => {
      got += c.toString("latin1");
    });
    s.on("error", () => {});
    s.on("close", () => {
      clearTimeout(timer);
      resolve(got);
    });
  });
}

async function issue(tenant: string, ...flags: string[]) {
  return (await store.run(["install-token", tenant, `--gateway-address=${t.agent}`, ...flags])) as {
    installToken: { token: string; tokenId: string; url: string; expiresAt: string; singleUse: boolean };
    command: string;
    curlCommand: string | null;
  };
}

function agentTokenOf(manifest: string): string {
  const secret = parseAllDocuments(manifest)
    .map((d) => d.toJS() as { kind: string; data?: Record<string, string> })
    .find((o) => o.kind === "Secret");
  const [value] = Object.values(secret?.data ?? {});
  return Buffer.from(value ?? "", "base64").toString("utf8");
}

async function lookupNow() {
  const s = await openFileTenantStore(store.dir);
  try {
    const records = new Map((await s.list()).tenants.map((r) => [r.id, r]));
    return (id: string) => records.get(id);
  } finally {
    await s.close();
  }
}

beforeAll(async () => {
  pki = await getTestPki();
  ca = readFileSync(pki.files.caCert);
  baseline = resources();
  store = makeTenantStore(pki);
  await store.create("acme");
  await store.create("globex");
  t = await startTenantGateway(store.dir, [
    `--install-gateway-address=${INSTALL_ADDRESS}`,
    "--header-timeout=1s",
    `--install-port=${await closedPort()}`,
    "--install-bind-address=127.0.0.1",
  ]);
});

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await t?.gw.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

describe("kgw tenant install-token, then kubectl apply -f <the link>", () => {
  it("prints the one line and its curl twin, and serves the manifest once", async () => {
    const issued = await issue("acme");
    const { token, url } = issued.installToken;
    expect(token).toMatch(/^kgw_install_acme_[0-9a-f]{16}_[0-9a-f]{64}$/);
    expect(url).toBe(`https://${t.agent}/v1/install/${token}.yaml`);
    expect(issued.command).toBe(`kubectl apply -f ${url}`);
    expect(issued.curlCommand).toBe(`curl --cacert ${pki.files.caCert} -fsSL ${url} | kubectl apply -f -`);
    expect(issued.installToken.singleUse).toBe(true);

    const first = await fetchUrl(url);
    expect(first.status).toBe(200);
    expect(first.headers["content-type"]).toMatch(/^application\/yaml/);
    expect(first.headers["cache-control"]).toBe("no-store");
    expect(first.headers.connection).toBe("close");
    expect(first.body).toContain(INSTALL_ADDRESS.split(":")[0]);

    // The agent token in the Secret is the tenant's, and authenticates as its agent.
    const agentToken = agentTokenOf(first.body);
    const principal = authenticateToken(await lookupNow(), agentToken, "agent", new Date());
    expect(principal).toMatchObject({ tenantId: "acme", role: "agent", credential: "token" });

    const second = await fetchUrl(url);
    expect(second.status).toBe(410);
    expect(second.body).not.toContain("acme");

    const shown = (await store.run(["show", "acme"])) as {
      tenant: { installTokens: { id: string; status: string }[] };
    };
    expect(shown.tenant.installTokens).toContainEqual(
      expect.objectContaining({ id: issued.installToken.tokenId, status: "used" }),
    );
    expect(JSON.stringify(shown)).not.toContain(token);
  });

  it("works with curl --cacert exactly as printed", async (ctx) => {
    const hasCurl = await promisify(execFile)("curl", ["--version"]).then(
      () => true,
      () => false,
    );
    ctx.skip(!hasCurl, "curl is not on the PATH: the curl variant of the install line cannot be run here");
    const issued = await issue("acme");
    const { stdout } = await promisify(execFile)("curl", [
      "--cacert",
      pki.files.caCert,
      "-fsSL",
      issued.installToken.url,
    ]);
    expect(agentTokenOf(stdout)).toMatch(/^kgw_agent_acme_/);
    // -f makes curl fail on the 410 a second fetch gets.
    await expect(
      promisify(execFile)("curl", ["--cacert", pki.files.caCert, "-fsSL", issued.installToken.url]),
    ).rejects.toThrow(/410/);
  });

  it("answers 404 to unknown tenants, unknown ids and revoked links alike, without naming anyone", async () => {
    const issued = await issue("globex");
    const real = issued.installToken.token;
    const wrongSecret = `${real.slice(0, -64)}${randomBytes(32).toString("hex")}`;
    const unknownTenant = real.replace("_globex_", "_initech_");
    const unknownId = `kgw_install_globex_${randomBytes(8).toString("hex")}_${randomBytes(32).toString("hex")}`;
    const base = `https://${t.agent}/v1/install/`;
    const answers = await Promise.all(
      [wrongSecret, unknownTenant, unknownId, "not-a-token", "kgw_agent_x"].map((x) =>
        fetchUrl(`${base}${x}.yaml`),
      ),
    );
    for (const a of answers) {
      expect(a.status).toBe(404);
      expect(a.body).toBe(answers[0]!.body);
      expect(a.body).not.toMatch(/globex|initech/);
    }
    await store.run(["revoke", "globex", issued.installToken.tokenId, "--yes"]);
    const revoked = await fetchUrl(issued.installToken.url);
    expect(revoked.status).toBe(404);
    expect(revoked.body).toBe(answers[0]!.body);
  });

  it("answers 410 once the link has expired", async () => {
    const issued = await issue("acme", "--ttl=1s");
    const ends = Date.parse(issued.installToken.expiresAt);
    await waitFor(() => Date.now() > ends + 20, 5000, "the link's expiry");
    const late = await fetchUrl(issued.installToken.url);
    expect(late.status).toBe(410);
  });

  it("gives exactly one of two concurrent fetches of a single-use link the manifest", async () => {
    const issued = await issue("acme");
    const answers = await Promise.all([fetchUrl(issued.installToken.url), fetchUrl(issued.installToken.url)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 410]);
  });

  it("serves a reusable link until it expires, a new agent token each time", async () => {
    const issued = await issue("acme", "--reusable");
    const a = await fetchUrl(issued.installToken.url);
    const b = await fetchUrl(issued.installToken.url);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(agentTokenOf(a.body)).not.toBe(agentTokenOf(b.body));
  });

  it("counts fetches by outcome and never logs a secret", async () => {
    const issued = await issue("acme");
    await fetchUrl(issued.installToken.url);
    const metrics = await new Promise<string>((resolve, reject) => {
      httpGet(`http://${t.admin}/metrics`, (res) => {
        let text = "";
        res.on("data", (c: Buffer) => {
          text += c.toString();
        });
        res.on("end", () => resolve(text));
      }).on("error", reject);
    });
    expect(metrics).toMatch(/kgw_server_install_requests_total\{outcome="ok"\} [1-9]/);
    expect(metrics).toMatch(/kgw_server_install_requests_total\{outcome="gone"\} [1-9]/);
    expect(metrics).toMatch(/kgw_server_install_requests_total\{outcome="not_found"\} [1-9]/);
    const logs = t.logs.join("\n");
    expect(logs).toContain(issued.installToken.tokenId);
    expect(logs).not.toContain(issued.installToken.token.slice(-64));
  });
});

describe("what is not a fetch of a link", () => {
  const path = `/v1/install/kgw_install_acme_0123456789abcdef_${"0".repeat(64)}.yaml`;

  it("refuses a GET with a body (400) and other methods (405), and closes", async () => {
    const withBody = await exchange((s) =>
      s.write(`GET ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello`),
    );
    expect(withBody).toMatch(/^HTTP\/1\.1 400 /);
    expect(withBody).toContain("Connection: close");
    const post = await exchange((s) => s.write(`POST ${path} HTTP/1.1\r\nHost: x\r\n\r\n`));
    expect(post).toMatch(/^HTTP\/1\.1 405 /);
    const other = await exchange((s) => s.write("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    expect(other).toMatch(/^HTTP\/1\.1 404 /);
  });

  it("refuses a huge path (400) and a head past --max-header-bytes (431)", async () => {
    const long = await exchange((s) =>
      s.write(`GET /v1/install/${"a".repeat(2000)}.yaml HTTP/1.1\r\nHost: x\r\n\r\n`),
    );
    expect(long).toMatch(/^HTTP\/1\.1 400 /);
    const huge = await exchange((s) => s.write(`GET /${"a".repeat(20_000)} HTTP/1.1\r\n`));
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
  });

  it("cuts off a head trickled slower than --header-timeout (408)", async () => {
    const started = Date.now();
    const slow = await exchange((s) => {
      s.write("GET /v1/inst");
      const more = setTimeout(() => s.write("all/x"), 300);
      s.once("close", () => clearTimeout(more));
    });
    expect(slow).toMatch(/^HTTP\/1\.1 408 /);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it("never takes an install token as an agent's or a caller's credential", async () => {
    const issued = await issue("acme", "--reusable");
    const lookup = await lookupNow();
    for (const role of ["agent", "caller"] as const) {
      expect(() => authenticateToken(lookup, issued.installToken.token, role, new Date())).toThrow(
        expect.objectContaining({ reason: "wrong-role" }),
      );
    }
    const [host, port] = t.agent.split(":");
    const answer = await exchange((s) =>
      s.write(
        `CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: 127.0.0.1:1\r\nProxy-Authorization: Bearer ${issued.installToken.token}\r\n\r\n`,
      ),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(host && port).toBeTruthy();
  });
});

describe("--install-port: the install route alone, behind a load balancer's TLS listener", () => {
  const installUrl = (token: { url: string }) => {
    const u = new URL(token.url);
    u.port = String(t.gw.addresses.install!.port);
    return u.toString();
  };

  it("serves a link over TLS without a client certificate, as kubectl fetches it", async () => {
    const issued = await issue("acme");
    const fetched = await fetchUrl(installUrl(issued.installToken));
    expect(fetched.status).toBe(200);
    expect(fetched.headers["content-type"]).toMatch(/^application\/yaml/);
    expect(agentTokenOf(fetched.body)).toMatch(/^kgw_agent_acme_/);
    // Spent: the same answers as on the gateway port.
    expect((await fetchUrl(installUrl(issued.installToken))).status).toBe(410);
  });

  it("serves nothing else: CONNECT 405, other paths 404, bad heads 400/431/408", async () => {
    const port = t.gw.addresses.install!.port;
    const connect = await exchange(
      (s) => s.write("CONNECT 127.0.0.1:1 HTTP/1.1\r\nHost: x\r\n\r\n"),
      10_000,
      port,
    );
    expect(connect).toMatch(/^HTTP\/1\.1 405 /);
    expect(connect).toContain("Allow: GET");
    const other = await exchange((s) => s.write("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), 10_000, port);
    expect(other).toMatch(/^HTTP\/1\.1 404 /);
    const garbage = await exchange((s) => s.write("\x16\x03\x01garbage\r\n\r\n"), 10_000, port);
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    const huge = await exchange((s) => s.write(`GET /${"a".repeat(20_000)} HTTP/1.1\r\n`), 10_000, port);
    expect(huge).toMatch(/^HTTP\/1\.1 431 /);
    const slow = await exchange((s) => s.write("GET /v1/inst"), 10_000, port);
    expect(slow).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("refuses gRPC: a client offering only h2 gets no protocol and no session", async () => {
    const outcome = await new Promise<string>((resolve) => {
      const s = tlsConnect({
        host: "127.0.0.1",
        port: t.gw.addresses.install!.port,
        ca,
        servername: "localhost",
        ALPNProtocols: ["h2"],
      });
      sockets.push(s);
      s.once("secureConnect", () => {
        resolve(`connected with ${String(s.alpnProtocol)}`);
        s.destroy();
      });
      s.once("error", (err) => resolve(`refused: ${err.message}`));
    });
    expect(outcome).toMatch(/^refused: .*no application protocol/i);
  });
});
