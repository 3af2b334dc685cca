/**
 * `kgw tenant manifest` as an operator uses it: the YAML on stdout for `| kubectl apply -f -` (and
 * nothing else there), or in a 0600 file; a fresh agent token in it each time, the other tokens
 * left valid; and every bad flag refused before a token is minted.
 */
import fs from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { IDeployment } from "kubernetes-models/apps/v1/Deployment";
import type { IConfigMap } from "kubernetes-models/v1/ConfigMap";
import type { ISecret } from "kubernetes-models/v1/Secret";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import { authenticateToken } from "../../lib/tenancy/verify.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

let root: string;
let env: Record<string, string>;
let pki: TestPki;
let createdToken: string;

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

type Doc = { kind: string; metadata: { name: string; namespace?: string } };
const docsOf = (yaml: string) => parseAllDocuments(yaml).map((d) => d.toJS() as Doc);
const find = <T>(docs: Doc[], kind: string) => docs.find((d) => d.kind === kind) as T;
const tokenOf = (docs: Doc[]) =>
  Buffer.from(find<ISecret>(docs, "Secret").data!.token!, "base64").toString("utf8");
const caOf = (docs: Doc[]) => find<IConfigMap>(docs, "ConfigMap").data!["ca.crt"];
const deploymentOf = (docs: Doc[]) => find<IDeployment>(docs, "Deployment");
const containerOf = (docs: Doc[]) => deploymentOf(docs).spec!.template.spec!.containers[0]!;
const TOKEN = /kgw_agent_[a-z0-9-]+_[0-9a-f]{16}_[0-9a-f]{64}/;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), "kgw-manifest-cli-"));
  pki = await getTestPki();
  env = {
    KGW_TENANT_STORE_DIR: path.join(root, "store"),
    KGW_CA_CERT: pki.files.caCert,
    KGW_CA_KEY: pki.files.caKey,
    KGW_GATEWAY_ADDRESS: "gw.example.com:8132",
  };
  const created = await kgw("create", "acme", "--bundle=false");
  expect(created.code).toBe(0);
  createdToken = TOKEN.exec(created.out)![0];
  expect((await kgw("create", "gone", "--bundle=false")).code).toBe(0);
  expect((await kgw("delete", "gone", "--yes")).code).toBe(0);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe("kgw tenant manifest", () => {
  it("prints only the YAML on stdout, with a new agent token the gateway accepts; the old one stays valid", async () => {
    const r = await kgw("manifest", "acme");
    expect(r.code).toBe(0);
    const docs = docsOf(r.out);
    expect(docs.map((d) => d.kind)).toEqual([
      "Namespace",
      "ServiceAccount",
      "Secret",
      "ConfigMap",
      "Deployment",
      "PodDisruptionBudget",
    ]);
    const token = tokenOf(docs);
    expect(token).not.toBe(createdToken);
    const rec = await record("acme");
    for (const t of [token, createdToken])
      expect(authenticateToken(() => rec, t, "agent", new Date()).tenantId).toBe("acme");
    const tokenId = token.split("_")[3]!;
    expect(r.err).toContain(`new agent token, id ${tokenId}`);
    expect(r.err).not.toContain(token);
    expect(containerOf(docs).args).toContain("--proxy-server-host=gw.example.com");
    expect(caOf(docs)).toBe(fs.readFileSync(pki.files.caCert, "utf8"));
  });

  it("--out writes the YAML 0600 and prints where, not the token", async () => {
    const file = path.join(root, "acme-agent.yaml");
    // An existing, readable file must not briefly hold the token readable: it is replaced, not rewritten.
    fs.writeFileSync(file, "old", { mode: 0o644 });
    const r = await kgw("manifest", "acme", `--out=${file}`);
    expect(r.code).toBe(0);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    const token = tokenOf(docsOf(fs.readFileSync(file, "utf8")));
    expect(r.out).toContain(`written to ${file} (mode 0600)`);
    expect(r.out).not.toMatch(TOKEN);
    expect(r.err).toBe("");
    const rec = await record("acme");
    expect(authenticateToken(() => rec, token, "agent", new Date()).tenantId).toBe("acme");
  });

  it("--output=json gives the manifest and the token id, or the file", async () => {
    const r = await kgw("manifest", "acme", "--output=json");
    expect(r.code).toBe(0);
    const json = JSON.parse(r.out) as { tenant: { id: string }; agentTokenId: string; manifest: string };
    expect(json.tenant.id).toBe("acme");
    expect(tokenOf(docsOf(json.manifest)).split("_")[3]).toBe(json.agentTokenId);
    const file = path.join(root, "acme-agent.json.yaml");
    const w = JSON.parse((await kgw("manifest", "acme", "--output=json", `--out=${file}`)).out);
    expect(w).toMatchObject({ file, agentTokenId: expect.stringMatching(/^[0-9a-f]{16}$/) });
    expect(w.manifest).toBeUndefined();
  });

  it("takes the flavor, image, namespace, replicas and CA bundle", async () => {
    const r = await kgw(
      "manifest",
      "acme",
      "--agent-flavor=upstream",
      "--agent-image=registry.example.com/proxy-agent:v0.36.0",
      "--namespace=tunnels",
      "--replicas=3",
      `--server-ca-bundle=${pki.files.otherCaCert}`,
      "--gateway-address=[2001:db8::1]:443",
    );
    expect(r.code).toBe(0);
    const docs = docsOf(r.out);
    const c = containerOf(docs);
    expect(c.command).toEqual(["/proxy-agent"]);
    expect(c.image).toBe("registry.example.com/proxy-agent:v0.36.0");
    expect(c.args!.slice(0, 2)).toEqual(["--proxy-server-host=2001:db8::1", "--proxy-server-port=443"]);
    expect(deploymentOf(docs).spec!.replicas).toBe(3);
    expect(docs.every((d) => d.kind === "Namespace" || d.metadata.namespace === "tunnels")).toBe(true);
    expect(caOf(docs)).toBe(fs.readFileSync(pki.files.otherCaCert, "utf8"));
  });

  it("refuses bad input with exit 2 and mints nothing", async () => {
    const tokens = (await record("acme"))!.agentTokens.length;
    const cases: [string[], RegExp][] = [
      [["--agent-image=nginx"], /--agent-image|tag or a digest/],
      [["--namespace=Kube_System"], /not a namespace name/],
      [["--replicas=0"], /from 1 to 10/],
      [["--agent-flavor=helm"], /not one of kgw, upstream/],
      [["--gateway-address=gw.example.com"], /--gateway-address: expected host:port/],
      [[`--server-ca-bundle=${pki.files.caKey}`], /--server-ca-bundle: .*other than certificates/],
      [[`--server-ca-bundle=${path.join(root, "missing.pem")}`], /--server-ca-bundle: cannot read .*ENOENT/],
      [["--ca-key=x"], /--ca-key does not apply to kgw tenant manifest/],
      [["--mount-dir=/x"], /--mount-dir does not apply/],
    ];
    for (const [flags, words] of cases) {
      const r = await kgw("manifest", "acme", ...flags);
      expect([r.code, flags]).toEqual([2, flags]);
      expect(r.err).toMatch(words);
      expect(r.out).toBe("");
    }
    const noGateway = { ...env, KGW_GATEWAY_ADDRESS: "" };
    expect(() => parseTenantCommand(["manifest", "acme"], noGateway)).toThrow(/needs --gateway-address/);
    expect((await kgw("manifest", "Acme")).code).toBe(2);
    expect((await record("acme"))!.agentTokens.length).toBe(tokens);
  });

  it("refuses an unknown or deleted tenant with exit 3 (not found)", async () => {
    for (const id of ["nobody", "gone"]) {
      const r = await kgw("manifest", id);
      expect(r.code).toBe(3);
      expect(r.err).toMatch(new RegExp(`tenant ${id} not found`));
      expect(r.out).toBe("");
    }
  });

  it("a manifest that cannot be written names the token minted for it", async () => {
    const r = await kgw("manifest", "acme", `--out=${path.join(root, "no-such-dir", "m.yaml")}`);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /was not written.*\n.*agent token [0-9a-f]{16} is listed but unused: kgw tenant revoke acme [0-9a-f]{16}/,
    );
  });

  it("says in its help that it mints a token because stored ones cannot be printed", async () => {
    const help = (await kgw("manifest", "--help")).out;
    expect(help).toMatch(/mints a new agent token .*stored tokens are hashed and cannot be printed again/);
    for (const f of [
      "--agent-flavor",
      "--agent-image",
      "--namespace",
      "--replicas",
      "--out",
      "--gateway-address",
    ]) {
      expect(help).toContain(f);
    }
    expect((await kgw("--help")).out).toMatch(/manifest TENANT/);
  });
});
