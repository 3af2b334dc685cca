/**
 * `--ca-secret` as an operator runs it after the runbook deleted the local CA keys: `kgw pki
 * serving|peer` sign with the CA in Secrets Manager, and `kgw tenant manifest` takes the gateway
 * CA's certificate from it. The compiled CLI, the real AWS SDK client, a local Secrets Manager
 * (test/helpers/secrets-manager.ts) and dynalite for the tenant table; each failure an operator
 * can meet (no such secret, a value that is not a CA secret, access denied) says what it is and
 * ends with the documented exit code (docs/CONFIGURATION.md, "Exit codes").
 */
import { X509Certificate } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseCaSecret } from "../../lib/deploy/secret-layout.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import { requireBuild, runKgwBin } from "../helpers/kgw-bin.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";
import { type LocalSecretsManager, startLocalSecretsManager } from "../helpers/secrets-manager.js";

let dir: string;
let sm: LocalSecretsManager;
let dynamo: LocalDynamo;
let gatewayCaArn: string;
let peerCaArn: string;
let baseline: Map<string, number>;

const kgw = (args: string[], env: Record<string, string> = {}) =>
  runKgwBin(args, { env: { ...sm.env, ...dynamo.env, ...env } });

beforeAll(async () => {
  requireBuild();
  baseline = activeResources();
  dir = await mkdtemp(path.join(tmpdir(), "kgw-ca-secret-"));
  [sm, dynamo] = await Promise.all([startLocalSecretsManager(), startLocalDynamo()]);
  // What the runbook does: make the CAs, store them, delete the local keys.
  expect((await kgw(["pki", "ca", `--out=${dir}/gateway-ca`])).code).toBe(0);
  expect((await kgw(["pki", "ca", "--peer", `--out=${dir}/peer-ca`])).code).toBe(0);
  gatewayCaArn = sm.create("KgwGatewayCa", await readFile(`${dir}/gateway-ca/ca-secret.json`, "utf8"));
  peerCaArn = sm.create("KgwPeerCa", await readFile(`${dir}/peer-ca/ca-secret.json`, "utf8"));
  for (const key of ["gateway-ca/ca-key.pem", "gateway-ca/ca-secret.json", "peer-ca"]) {
    await rm(path.join(dir, key), { recursive: true });
  }
}, 60_000);

afterAll(async () => {
  await Promise.all([sm?.close(), dynamo?.close()]);
  await rm(dir, { recursive: true, force: true });
  await expectNoLeakedResources(baseline);
});

/** The manifest's YAML indents the CA's PEM lines: compare without the indentation. */
const unindented = (yaml: string) => yaml.replace(/^ +/gm, "");

const secretJson = async (file: string) => JSON.parse(await readFile(file, "utf8")) as Record<string, string>;

describe("kgw pki --ca-secret", () => {
  it("serving: signs with the gateway CA from the secret; the TLS secret trusts that CA", async () => {
    const r = await kgw([
      "pki",
      "serving",
      `--ca-secret=${gatewayCaArn}`,
      "--dns-names=gateway.example.com",
      `--out=${dir}/tls`,
    ]);
    expect(r).toMatchObject({ code: 0, err: "" });
    const tls = await secretJson(`${dir}/tls/tls-secret.json`);
    const ca = parseCaSecret(sm.value(gatewayCaArn)!, "stand-in");
    expect(new X509Certificate(tls.certificate!).checkIssued(new X509Certificate(ca.certificate))).toBe(true);
    expect(tls.caCertificate).toBe(ca.certificate);
    expect(sm.calls.get("GetSecretValue")).toBeGreaterThan(0);
  });

  it("peer: signs with the peer CA from the secret, by name as well as ARN", async () => {
    const r = await kgw(["pki", "peer", "--ca-secret=KgwPeerCa", `--out=${dir}/peer`]);
    expect(r).toMatchObject({ code: 0, err: "" });
    const peer = await secretJson(`${dir}/peer/tls-secret.json`);
    const ca = parseCaSecret(sm.value(peerCaArn)!, "stand-in");
    expect(new X509Certificate(peer.certificate!).checkIssued(new X509Certificate(ca.certificate))).toBe(
      true,
    );
  });

  it("--ca-bundle: the TLS secret trusts the bundle (old and new CA), which must include the signer", async () => {
    expect((await kgw(["pki", "ca", `--out=${dir}/next-ca`])).code).toBe(0);
    const current = parseCaSecret(sm.value(gatewayCaArn)!, "stand-in").certificate;
    const next = await readFile(`${dir}/next-ca/ca.pem`, "utf8");
    await writeFile(`${dir}/both.pem`, current + next);
    const args = ["pki", "serving", `--ca-secret=${gatewayCaArn}`, "--dns-names=gateway.example.com"];
    const ok = await kgw([...args, `--ca-bundle=${dir}/both.pem`, `--out=${dir}/tls-both`]);
    expect(ok).toMatchObject({ code: 0, err: "" });
    expect((await secretJson(`${dir}/tls-both/tls-secret.json`)).caCertificate).toBe(current + next);

    const without = await kgw([...args, `--ca-bundle=${dir}/next-ca/ca.pem`, `--out=${dir}/tls-bad`]);
    expect(without.code).toBe(2);
    expect(without.err).toMatch(/--ca-bundle: .* does not include the signing CA/);
  });

  it("refuses two CAs, and names what is wrong with a secret, with the documented exit codes", async () => {
    const serving = (secret: string) =>
      kgw(["pki", "serving", `--ca-secret=${secret}`, "--dns-names=gw.example.com", `--out=${dir}/x`]);
    const both = await kgw([
      "pki",
      "serving",
      `--ca-secret=${gatewayCaArn}`,
      `--ca-cert=${dir}/gateway-ca/ca.pem`,
      "--ca-key=k.pem",
      "--dns-names=gw.example.com",
      `--out=${dir}/x`,
    ]);
    expect(both).toMatchObject({ code: 2 });
    expect(both.err).toMatch(/--ca-secret and --ca-cert\/--ca-key name two CAs/);

    // Not there: exit 3, as a missing tenant.
    const missing = await serving("KgwNoSuchSecret");
    expect(missing.code).toBe(3);
    expect(missing.err).toMatch(/--ca-secret KgwNoSuchSecret: ResourceNotFoundException: no such secret/);

    // The stack's initial "{}", and a TLS secret given for a CA secret: usage, exit 2.
    sm.create("KgwEmpty");
    const empty = await serving("KgwEmpty");
    expect(empty.code).toBe(2);
    expect(empty.err).toMatch(/--ca-secret KgwEmpty: the secret has no "certificate"/);
    sm.create("KgwTls", await readFile(`${dir}/tls/tls-secret.json`, "utf8"));
    const tls = await serving("KgwTls");
    expect(tls.code).toBe(2);
    expect(tls.err).toMatch(/--ca-secret KgwTls: .*not a CA/);

    // Refused by IAM: exit 1, naming the permission to ask for.
    sm.create("KgwDenied", sm.value(gatewayCaArn));
    sm.deny("KgwDenied");
    const denied = await serving("KgwDenied");
    expect(denied.code).toBe(1);
    expect(denied.err).toMatch(/AccessDeniedException: .*secretsmanager:GetSecretValue/);
    // No key material in any message.
    for (const r of [missing, empty, tls, denied]) expect(r.err).not.toMatch(/PRIVATE KEY|BEGIN/);
  });
});

describe("kgw tenant manifest --ca-secret", () => {
  it("puts the gateway CA of the secret in the manifest, also from $KGW_CA_SECRET as the runbook exports it", async () => {
    const env = { KGW_TENANT_TABLE: dynamo.tableName, KGW_GATEWAY_ADDRESS: "gateway.example.com:8132" };
    const created = await kgw(["tenant", "create", "acme", "--bundle=false"], env);
    expect(created.code).toBe(0);
    const ca = parseCaSecret(sm.value(gatewayCaArn)!, "stand-in").certificate;

    const flag = await kgw(["tenant", "manifest", "acme", `--ca-secret=${gatewayCaArn}`], env);
    expect(flag.code).toBe(0);
    expect(unindented(flag.out)).toContain(ca);

    const fromEnv = await kgw(["tenant", "manifest", "acme"], { ...env, KGW_CA_SECRET: gatewayCaArn });
    expect(fromEnv.code).toBe(0);
    expect(unindented(fromEnv.out)).toContain(ca);

    // A bundle file given on the command line wins (a rotation's old and new CA).
    const bundle = await kgw(["tenant", "manifest", "acme", `--server-ca-bundle=${dir}/both.pem`], {
      ...env,
      KGW_CA_SECRET: gatewayCaArn,
    });
    expect(bundle.code).toBe(0);
    expect(unindented(bundle.out)).toContain(await readFile(`${dir}/both.pem`, "utf8"));

    const missing = await kgw(["tenant", "manifest", "acme", "--ca-secret=KgwNoSuchSecret"], env);
    expect(missing.code).toBe(3);
    expect(missing.err).toMatch(/--ca-secret KgwNoSuchSecret: ResourceNotFoundException/);
  });
});
