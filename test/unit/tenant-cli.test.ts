/**
 * `kgw tenant` as an operator uses it: create, list, show, rotate, revoke, delete, bundle against a
 * real file store and a real CA. Secrets are printed once and found nowhere else; the bundle's
 * certificate gets through a real TLS handshake and the tenant's allowlist until it is revoked.
 */
import { createPrivateKey, X509Certificate } from "node:crypto";
import fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import tls from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import {
  authenticateAgentCertificate,
  authenticateCallerCertificate,
  authenticateToken,
  recheckPrincipal,
} from "../../lib/tenancy/verify.js";
import { egressProblems, parseEgress } from "../helpers/egress-config.js";
import { spawnKgw } from "../helpers/kgw-process.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

let root: string;
let env: Record<string, string>;
let pki: TestPki;
let clock = new Date();

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "kgw-tenant-cli-"));
  pki = await getTestPki();
  env = {
    KGW_TENANT_STORE_DIR: path.join(root, "store"),
    KGW_CA_CERT: pki.files.caCert,
    KGW_CA_KEY: pki.files.caKey,
    KGW_GATEWAY_ADDRESS: "localhost:8132",
  };
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Runs one `kgw tenant` command in-process; the clock is `clock`. */
async function kgw(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  let parsed: ReturnType<typeof parseTenantCommand>;
  try {
    parsed = parseTenantCommand(argv, env);
  } catch (e) {
    return { code: 2, out, err: (e as Error).message };
  }
  if (parsed.help) return { code: 0, out: parsed.text, err };
  const code = await runTenantCommand(parsed.command, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    now: () => clock,
  });
  return { code, out, err };
}

async function record(id: string): Promise<TenantRecord | undefined> {
  const store = await openFileTenantStore(env.KGW_TENANT_STORE_DIR!);
  try {
    return await store.get(id);
  } finally {
    await store.close();
  }
}

function allFilesUnder(dir: string): string {
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => fs.readFileSync(path.join(e.parentPath, e.name), "utf8"))
    .join("\n");
}

/**
 * A TLS server trusting the gateway CA, as the gateway's frontend and agent port do; returns the
 * peer it saw. The client uses the bundle's files: the caller bundle's, or the agent bundle's.
 */
async function handshake(
  bundleDir: string,
  names = { cert: "client.crt", key: "client.key" },
): Promise<tls.PeerCertificate> {
  const server = tls.createServer({
    cert: fs.readFileSync(pki.files.serverCert),
    key: fs.readFileSync(pki.files.serverKey),
    ca: fs.readFileSync(pki.files.caCert),
    requestCert: true,
    rejectUnauthorized: true,
  });
  const peer = new Promise<tls.PeerCertificate>((resolve) =>
    server.once("secureConnection", (s) => {
      resolve(s.getPeerCertificate());
      s.end();
    }),
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const socket = tls.connect({
    port: (server.address() as AddressInfo).port,
    host: "127.0.0.1",
    servername: "localhost",
    ca: fs.readFileSync(path.join(bundleDir, "ca.crt")),
    cert: fs.readFileSync(path.join(bundleDir, names.cert)),
    key: fs.readFileSync(path.join(bundleDir, names.key)),
  });
  socket.on("error", () => {});
  try {
    return await peer;
  } finally {
    socket.destroy();
    await new Promise((r) => server.close(r));
  }
}

const tokenIn = (text: string, kind: string) =>
  new RegExp(`kgw_${kind}_[a-z0-9-]+_[0-9a-f]{16}_[0-9a-f]{64}`).exec(text)?.[0];

describe("kgw tenant", () => {
  let agentToken: string;
  let callerToken: string;
  let bundleDir: string;

  it("create prints the agent token once and writes a bundle kube-apiserver accepts", async () => {
    bundleDir = path.join(root, "acme-bundle");
    const r = await kgw(
      "create",
      "acme",
      "--display-name",
      "Acme prod",
      "--caller-token",
      `--out=${bundleDir}`,
      `--mount-dir=${bundleDir}`,
    );
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    agentToken = tokenIn(r.out, "agent")!;
    callerToken = tokenIn(r.out, "caller")!;
    expect(agentToken).toBeDefined();
    expect(callerToken).toBeDefined();
    expect(r.out).toContain(`Caller bundle: ${bundleDir}`);

    const modes = Object.fromEntries(
      fs.readdirSync(bundleDir).map((f) => [f, fs.statSync(path.join(bundleDir, f)).mode & 0o777]),
    );
    expect(modes).toEqual({
      "ca.crt": 0o644,
      "client.crt": 0o644,
      "client.key": 0o600,
      "egress-selector-configuration.yaml": 0o644,
      "egress-selector-configuration-uds.yaml": 0o644,
    });
    // Mounted where it was written, so kube-apiserver's own file checks apply too.
    for (const name of ["egress-selector-configuration.yaml", "egress-selector-configuration-uds.yaml"]) {
      for (const doc of parseEgress(fs.readFileSync(path.join(bundleDir, name), "utf8"))) {
        expect(egressProblems(doc, true)).toEqual([]);
      }
    }
    const cert = new X509Certificate(fs.readFileSync(path.join(bundleDir, "client.crt")));
    expect(cert.subjectAltName).toBe("URI:kgw://tenant/acme/caller");
    expect(cert.checkIssued(new X509Certificate(fs.readFileSync(pki.files.caCert)))).toBe(true);
  });

  it("stores no secret: neither token appears in the store, and show/list print no hash", async () => {
    const stored = allFilesUnder(env.KGW_TENANT_STORE_DIR!);
    for (const secret of [agentToken, callerToken]) {
      expect(stored).not.toContain(secret);
      expect(stored).not.toContain(secret.slice(-64));
    }
    const hashes = [...(await record("acme"))!.agentTokens, ...(await record("acme"))!.callerTokens].map(
      (t) => t.sha256,
    );
    for (const args of [
      ["show", "acme"],
      ["show", "acme", "--output=json"],
      ["list"],
      ["list", "--output=json"],
    ]) {
      const r = await kgw(...args);
      expect(r.code).toBe(0);
      for (const s of [agentToken, callerToken, ...hashes]) expect(r.out).not.toContain(s);
    }
    // Versions, then usable agent tokens, agent certificates, caller certificates, caller tokens.
    expect((await kgw("list")).out).toMatch(/acme\s+active\s+2\s+1\s+0\s+1\s+1\s+Acme prod/);
  });

  it("the bundle's certificate passes TLS and the tenant's allowlist, until it is revoked", async () => {
    const peer = await handshake(bundleDir);
    const lookup = async () => {
      const r = await record("acme");
      return (id: string) => (id === "acme" ? r : undefined);
    };
    const principal = authenticateCallerCertificate(await lookup(), peer, clock);
    expect(principal).toMatchObject({ tenantId: "acme", role: "caller", credential: "certificate" });

    // Revoke it the way an operator copies a serial from openssl: upper case with colons.
    const serial = principal.credentialId.toUpperCase().match(/../g)!.join(":");
    const r = await kgw("revoke", "acme", serial, "--yes");
    expect(r.code).toBe(0);
    const after = await lookup();
    expect(() => authenticateCallerCertificate(after, peer, clock)).toThrow(
      expect.objectContaining({ code: "ERR_UNAUTHENTICATED", reason: "revoked" }),
    );
  });

  it("rotate issues a new agent token and keeps the old one for the grace period only", async () => {
    const r = await kgw("rotate", "acme", "--grace=1h");
    expect(r.code).toBe(0);
    const fresh = tokenIn(r.out, "agent")!;
    expect(fresh).not.toBe(agentToken);
    expect(r.out).toContain("The previous ones are accepted until");
    const rec = await record("acme");
    const lookup = () => rec;
    expect(authenticateToken(lookup, agentToken, "agent", clock).tenantId).toBe("acme");
    const afterGrace = new Date(clock.getTime() + 3_600_000);
    expect(() => authenticateToken(lookup, agentToken, "agent", afterGrace)).toThrow(
      expect.objectContaining({ reason: "expired" }),
    );
    expect(authenticateToken(lookup, fresh, "agent", afterGrace).tenantId).toBe("acme");
    agentToken = fresh;
  });

  it("rotate --credential=caller-certificate writes a new bundle; the old certificate keeps its grace", async () => {
    const first = path.join(root, "second-bundle");
    expect((await kgw("bundle", "acme", `--out=${first}`)).code).toBe(0);
    const oldPeer = await handshake(first);
    const rotated = path.join(root, "rotated-bundle");
    const r = await kgw(
      "rotate",
      "acme",
      "--credential=caller-certificate",
      "--grace=10m",
      `--out=${rotated}`,
    );
    expect(r.code).toBe(0);
    const newPeer = await handshake(rotated);
    const rec = await record("acme");
    const lookup = () => rec;
    const inGrace = new Date(clock.getTime() + 599_000);
    const afterGrace = new Date(clock.getTime() + 600_000);
    expect(authenticateCallerCertificate(lookup, oldPeer, inGrace).tenantId).toBe("acme");
    expect(() => authenticateCallerCertificate(lookup, oldPeer, afterGrace)).toThrow(
      expect.objectContaining({ reason: "expired" }),
    );
    expect(authenticateCallerCertificate(lookup, newPeer, afterGrace).tenantId).toBe("acme");
  });

  let agentBundleDir: string;
  let agentPeer: tls.PeerCertificate;
  const AGENT_FILES = { cert: "agent.crt", key: "agent.key" };

  it("rotate --credential=agent-certificate writes an agent bundle the agent's flags point at", async () => {
    agentBundleDir = path.join(root, "acme-agent");
    const r = await kgw("rotate", "acme", "--credential=agent-certificate", `--out=${agentBundleDir}`);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toContain("There was no previous one still valid.");
    expect(r.out).toContain(`Agent bundle: ${agentBundleDir}`);
    // Both agent tokens (the rotated one is in its grace) still work beside the certificate.
    expect(r.out).toContain("The tenant's 2 agent token(s) stay valid: revoke them once");
    expect(r.out).toContain(
      "--ca-cert=/etc/kgw-agent/ca.crt --agent-cert=/etc/kgw-agent/agent.crt --agent-key=/etc/kgw-agent/agent.key",
    );

    expect(fs.statSync(agentBundleDir).mode & 0o777).toBe(0o700);
    const modes = Object.fromEntries(
      fs.readdirSync(agentBundleDir).map((f) => [f, fs.statSync(path.join(agentBundleDir, f)).mode & 0o777]),
    );
    expect(modes).toEqual({ "ca.crt": 0o644, "agent.crt": 0o644, "agent.key": 0o600 });
    // The CA bundle that verifies the gateway defaults to the gateway CA, as for the caller bundle.
    expect(fs.readFileSync(path.join(agentBundleDir, "ca.crt"), "utf8")).toBe(
      fs.readFileSync(pki.files.caCert, "utf8"),
    );

    const cert = new X509Certificate(fs.readFileSync(path.join(agentBundleDir, "agent.crt")));
    expect(cert.subjectAltName).toBe("URI:kgw://tenant/acme/agent");
    expect(cert.subject.split("\n").sort()).toEqual(["CN=acme", "O=kgw:tenant-agent"]);
    expect(cert.keyUsage).toEqual(["1.3.6.1.5.5.7.3.2"]); // clientAuth only
    expect(cert.checkIssued(new X509Certificate(fs.readFileSync(pki.files.caCert)))).toBe(true);
    expect(cert.publicKey.asymmetricKeyDetails?.namedCurve).toBe("prime256v1");
    const key = fs.readFileSync(path.join(agentBundleDir, "agent.key"), "utf8");
    expect(cert.checkPrivateKey(createPrivateKey(key))).toBe(true);
    // The key is in the bundle and nowhere in the store.
    expect(allFilesUnder(env.KGW_TENANT_STORE_DIR!)).not.toContain(key.split("\n")[1]);
  });

  it("the agent certificate passes TLS and the agent allowlist, and is refused as a caller's", async () => {
    agentPeer = await handshake(agentBundleDir, AGENT_FILES);
    const rec = await record("acme");
    const lookup = () => rec;
    const principal = authenticateAgentCertificate(lookup, agentPeer, clock);
    expect(principal).toMatchObject({ tenantId: "acme", role: "agent", credential: "certificate" });
    expect(() => authenticateCallerCertificate(lookup, agentPeer, clock)).toThrow(
      expect.objectContaining({ code: "ERR_UNAUTHENTICATED", reason: "wrong-role" }),
    );
    // Rotating the certificate leaves the agent token alone: an agent may use either.
    expect(authenticateToken(lookup, agentToken, "agent", clock).tenantId).toBe("acme");
    expect(rec!.agentCertificates).toHaveLength(1);
  });

  it("show and list name the agent certificate, its subject, URI and notAfter", async () => {
    const serial = (await record("acme"))!.agentCertificates[0]!.id;
    const text = await kgw("show", "acme");
    expect(text.out).toMatch(new RegExp(`agent-certificate\\s+${serial}\\s+active`));
    const json = JSON.parse((await kgw("show", "acme", "--output=json")).out) as {
      tenant: { credentials: Record<string, unknown>[] };
    };
    expect(json.tenant.credentials.find((c) => c.id === serial)).toMatchObject({
      kind: "agent-certificate",
      status: "active",
      uri: "kgw://tenant/acme/agent",
      subject: expect.stringContaining("O=kgw:tenant-agent"),
      notAfter: expect.any(String),
    });
    expect((await kgw("list")).out).toMatch(/acme\s+active\s+\d+\s+\d+\s+1\s+/);
  });

  it("rotating the agent certificate again keeps the old one for the grace only; revoke takes its serial", async () => {
    const rotated = path.join(root, "acme-agent-2");
    const r = await kgw(
      "rotate",
      "acme",
      "--credential=agent-certificate",
      "--grace=10m",
      `--out=${rotated}`,
      "--mount-dir=/var/run/kgw-agent",
      "--output=json",
    );
    expect(r.code).toBe(0);
    const out = JSON.parse(r.out) as {
      agentBundle: { dir: string; files: Record<string, string>; serial: string; agentFlags: string[] };
    };
    expect(out.agentBundle.files).toEqual({
      caCert: path.join(rotated, "ca.crt"),
      agentCert: path.join(rotated, "agent.crt"),
      agentKey: path.join(rotated, "agent.key"),
    });
    expect(out.agentBundle.agentFlags).toEqual([
      "--ca-cert=/var/run/kgw-agent/ca.crt",
      "--agent-cert=/var/run/kgw-agent/agent.crt",
      "--agent-key=/var/run/kgw-agent/agent.key",
    ]);
    const newPeer = await handshake(rotated, AGENT_FILES);
    let rec = await record("acme");
    const inGrace = new Date(clock.getTime() + 599_000);
    const afterGrace = new Date(clock.getTime() + 600_000);
    const old = authenticateAgentCertificate(() => rec, agentPeer, inGrace);
    expect(() => authenticateAgentCertificate(() => rec, agentPeer, afterGrace)).toThrow(
      expect.objectContaining({ reason: "expired" }),
    );
    const fresh = authenticateAgentCertificate(() => rec, newPeer, afterGrace);
    expect(fresh.credentialId).toBe(out.agentBundle.serial);
    // What a server holding a stream opened with the old certificate learns as time passes.
    expect(recheckPrincipal(() => rec, old, inGrace)).toBeUndefined();
    expect(recheckPrincipal(() => rec, old, afterGrace)).toBe("expired");

    const colons = fresh.credentialId.toUpperCase().match(/../g)!.join(":");
    expect((await kgw("revoke", "acme", colons, "--yes")).code).toBe(0);
    rec = await record("acme");
    expect(recheckPrincipal(() => rec, fresh, clock)).toBe("revoked");
    expect(() => authenticateAgentCertificate(() => rec, newPeer, clock)).toThrow(
      expect.objectContaining({ reason: "revoked" }),
    );
  });

  it("reports what went wrong: 3 not found, 4 already so, 2 bad input", async () => {
    expect(await kgw("show", "nobody")).toMatchObject({
      code: 3,
      err: expect.stringContaining("tenant nobody not found"),
    });
    expect(await kgw("create", "acme", "--bundle=false")).toMatchObject({
      code: 4,
      err: expect.stringContaining("tenant acme already exists"),
    });
    expect(await kgw("revoke", "acme", "0123456789abcdef", "--yes")).toMatchObject({
      code: 3,
      err: expect.stringContaining("not found"),
    });
    expect(
      await kgw("create", "evil", "--display-name", "\u001b]0;owned\u0007", "--bundle=false"),
    ).toMatchObject({
      code: 2,
      err: expect.stringContaining("display name"),
    });
    const badCa = await kgw("create", "orphan", `--ca-key=${pki.files.otherCaKey}`);
    expect(badCa).toMatchObject({ code: 2, err: expect.stringContaining("--ca-cert/--ca-key") });
    expect(await record("orphan")).toBeUndefined();
    const missing = await kgw("create", "orphan", "--ca-cert=/nonexistent/ca.pem");
    expect(missing).toMatchObject({
      code: 2,
      err: expect.stringContaining("cannot read /nonexistent/ca.pem"),
    });
    expect(await record("orphan")).toBeUndefined();
  });

  it("policy --set refuses an empty rule set without --deny-all (exit 2, policy unchanged)", async () => {
    expect((await kgw("create", "walled", "--bundle=false")).code).toBe(0);
    const before = (await record("walled"))!.egress;
    const empty = await kgw("policy", "walled", "--set");
    expect(empty).toMatchObject({ code: 2, err: expect.stringContaining("--deny-all") });
    expect((await record("walled"))!.egress).toEqual(before);
    expect(await kgw("policy", "walled", "--set", "10.0.0.0/8", "--deny-all")).toMatchObject({
      code: 2,
      err: expect.stringContaining("--deny-all takes no RULE"),
    });
    expect(await kgw("policy", "walled", "--deny-all")).toMatchObject({
      code: 2,
      err: expect.stringContaining("--set"),
    });
    expect(await kgw("policy", "walled", "--set", "--deny-all")).toMatchObject({ code: 0 });
    expect((await record("walled"))!.egress.allow).toEqual([]);
  });

  it("policy --set warns on stderr about rules that can never decide a dial, and writes the policy", async () => {
    expect((await kgw("create", "lint", "--bundle=false")).code).toBe(0);
    const r = await kgw(
      "policy",
      "lint",
      "--set",
      "10.0.0.0/8",
      "127.0.0.1:8080",
      "10.1.0.0/16",
      "169.254.169.254",
    );
    expect(r.code).toBe(0);
    const warnings = r.err.trim().split("\n");
    expect(warnings).toEqual([
      expect.stringMatching(
        /^kgw tenant policy: warning: rule 127\.0\.0\.1\/32:8080 never decides a dial: .*--allow-loopback/,
      ),
      expect.stringMatching(
        /^kgw tenant policy: warning: rule 10\.1\.0\.0\/16 never decides a dial: the earlier rule 10\.0\.0\.0\/8/,
      ),
      expect.stringMatching(/^kgw tenant policy: warning: rule 169\.254\.169\.254\/32 .*--allow-link-local/),
    ]);
    expect((await record("lint"))!.egress.allow).toHaveLength(4);
    // With the flag that allows it, loopback is no longer flagged; a clean policy prints nothing.
    const fine = await kgw("policy", "lint", "--set", "10.0.0.0/8", "127.0.0.1:8080", "--allow-loopback");
    expect(fine).toMatchObject({ code: 0, err: "" });
  });

  it("lists the good tenants and names a corrupt record, exiting 1", async () => {
    expect((await kgw("create", "broken", "--bundle=false")).code).toBe(0);
    fs.writeFileSync(path.join(env.KGW_TENANT_STORE_DIR!, "tenants", "broken.json"), "{ not json");
    const r = await kgw("list");
    expect(r.code).toBe(1);
    expect(r.out).toContain("acme");
    expect(r.err).toContain("broken.json: not valid JSON");
    fs.rmSync(path.join(env.KGW_TENANT_STORE_DIR!, "tenants", "broken.json"));
  });

  it("delete refuses every credential at once; list hides the tenant unless --all", async () => {
    const r = await kgw("delete", "acme", "--yes");
    expect(r.code).toBe(0);
    const rec = await record("acme");
    expect(rec?.state).toBe("deleted");
    expect(() => authenticateToken(() => rec, agentToken, "agent", clock)).toThrow(
      expect.objectContaining({ reason: "tenant-deleted" }),
    );
    expect(() => authenticateAgentCertificate(() => rec, agentPeer, clock)).toThrow(
      expect.objectContaining({ reason: "tenant-deleted" }),
    );
    expect((await kgw("rotate", "acme", "--credential=agent-certificate", `--out=${root}/gone`)).code).toBe(
      3,
    );
    expect((await kgw("list")).out).not.toContain("acme");
    expect((await kgw("list", "--all")).out).toMatch(/acme\s+deleted/);
    expect((await kgw("show", "acme")).out).toContain("deleted");
    expect((await kgw("delete", "acme", "--yes")).code).toBe(3);
  });

  it("runs as `kgw tenant` from the command line", async () => {
    clock = new Date();
    const p = spawnKgw(["tenant", "create", "cli-smoke", "--bundle=false", "--output=json"], env);
    const { code } = await p.exited;
    const output = JSON.parse(p.output.join("")) as { agentToken: string; tenant: { id: string } };
    expect(code).toBe(0);
    expect(output.tenant.id).toBe("cli-smoke");
    expect(output.agentToken).toMatch(/^kgw_agent_cli-smoke_/);
    const bad = spawnKgw(["tenant", "list", "--grace=1h"], env);
    expect((await bad.exited).code).toBe(2);
    expect(bad.output.join("")).toContain("--grace does not apply");
  });
});
