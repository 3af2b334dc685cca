/**
 * `kgw tenant manifest` and `kgw server`'s install route from a copy of the package, as an
 * operator runs them from a checkout of a release: with the release's release.json beside
 * package.json the agent image is the released one by digest; without it, this version's tag;
 * with another release's file, a usage error that names the file (rather than agents pinned to a
 * release the gateway is not).
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { get as httpsGet } from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { IDeployment } from "kubernetes-models/apps/v1/Deployment";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { KGW_IMAGE_REPOSITORY, KGW_VERSION } from "../../lib/tenancy/manifest/images.js";
import { formatReleaseStamp, RELEASE_STAMP_FILE } from "../../lib/tenancy/manifest/release-stamp.js";
import { announcedPorts } from "../helpers/endpoints.js";
import { tenantGatewayFlags } from "../helpers/gateway.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

const DIGEST = `sha256:${"5e".repeat(32)}`;
const repo = fileURLToPath(new URL("../..", import.meta.url));
let root: string;
let pkg: string;
let env: NodeJS.ProcessEnv;
let pki: TestPki;
let baseline: Map<string, number>;

const kgw = (...argv: string[]) =>
  spawnSync(process.execPath, [path.join(pkg, "bin/kgw.js"), ...argv], { env, encoding: "utf8" });

const imageOf = (manifest: string): string => {
  const deployment = parseAllDocuments(manifest)
    .map((d) => d.toJS() as { kind: string })
    .find((d) => d.kind === "Deployment") as IDeployment;
  return deployment.spec!.template.spec!.containers[0]!.image!;
};

const manifestImage = (): string => {
  const r = kgw("tenant", "manifest", "acme");
  expect(r.stderr).not.toMatch(/kgw tenant:/);
  expect(r.status).toBe(0);
  return imageOf(r.stdout);
};

beforeAll(async () => {
  baseline = activeResources();
  root = mkdtempSync(path.join(tmpdir(), "kgw-release-stamp-"));
  // The package as an operator's checkout holds it after `npm ci` (which builds dist/).
  pkg = path.join(root, "kgw");
  for (const part of ["package.json", "bin", "dist"]) {
    cpSync(path.join(repo, part), path.join(pkg, part), { recursive: true });
  }
  symlinkSync(path.join(repo, "node_modules"), path.join(pkg, "node_modules"));
  pki = await getTestPki();
  env = {
    PATH: process.env.PATH,
    KGW_TENANT_STORE_DIR: path.join(root, "store"),
    KGW_CA_CERT: pki.files.caCert,
    KGW_CA_KEY: pki.files.caKey,
    KGW_GATEWAY_ADDRESS: "gw.example.com:8132",
  };
  const created = kgw("tenant", "create", "acme", "--bundle=false");
  expect(created.stderr).not.toMatch(/kgw tenant:/);
  expect(created.status).toBe(0);
});

afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await expectNoLeakedResources(baseline);
});

const stampFile = () => path.join(pkg, RELEASE_STAMP_FILE);

describe("the agent image of `kgw tenant manifest`", () => {
  it("is this version's tag without a release stamp", () => {
    rmSync(stampFile(), { force: true });
    expect(manifestImage()).toBe(`${KGW_IMAGE_REPOSITORY}:${KGW_VERSION}`);
  });

  it("is the released image by digest with the release's release.json", () => {
    writeFileSync(
      stampFile(),
      formatReleaseStamp({ version: KGW_VERSION, repository: KGW_IMAGE_REPOSITORY, digest: DIGEST }),
    );
    expect(manifestImage()).toBe(`${KGW_IMAGE_REPOSITORY}@${DIGEST}`);
  });

  it("is --agent-image when given, whatever the stamp", () => {
    writeFileSync(
      stampFile(),
      formatReleaseStamp({ version: KGW_VERSION, repository: KGW_IMAGE_REPOSITORY, digest: DIGEST }),
    );
    const r = kgw("tenant", "manifest", "acme", "--agent-image=registry.example.com/kgw:1.0.0");
    expect(r.status).toBe(0);
    expect(r.stdout).toContain("image: registry.example.com/kgw:1.0.0");
  });

  it("refuses another release's stamp, naming the file, before minting a token", () => {
    writeFileSync(
      stampFile(),
      formatReleaseStamp({ version: "9.9.9", repository: KGW_IMAGE_REPOSITORY, digest: DIGEST }),
    );
    const agentTokens = () => kgw("tenant", "show", "acme").stdout.match(/^agent-token /gm)?.length;
    const before = agentTokens();
    const r = kgw("tenant", "manifest", "acme");
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(stampFile());
    expect(r.stderr).toContain("the stamp of release 9.9.9");
    expect(r.stdout).toBe("");
    expect(before).toBeGreaterThan(0);
    expect(agentTokens()).toBe(before);
  });
});

/** A `kgw server` of the copied package with the install route on, until `stop`. */
async function startServer() {
  const portsFile = path.join(root, `ports-${Date.now()}.json`);
  const child = spawn(
    process.execPath,
    [
      path.join(pkg, "bin/kgw.js"),
      "server",
      ...tenantGatewayFlags(pki, env.KGW_TENANT_STORE_DIR!),
      "--install-gateway-address=gw.example.com:8132",
      `--ports-file=${portsFile}`,
    ],
    { env, stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  let code: number | null | undefined;
  void exited.then((c) => {
    code = c;
  });
  for (;;) {
    if (code !== undefined) return { code, stderr: () => stderr, ports: null, stop: async () => {} };
    const ports = announcedPorts(portsFile);
    if (ports) {
      return {
        code: null,
        stderr: () => stderr,
        ports,
        stop: async () => {
          child.kill("SIGTERM");
          await exited;
        },
      };
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

function fetchText(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpsGet(url, { ca: readFileSync(pki.files.caCert), agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }),
      );
      res.on("error", reject);
    }).on("error", reject);
  });
}

describe("the agent image of the install route (kgw server)", () => {
  it("is the released image by digest with the release's release.json", async () => {
    writeFileSync(
      stampFile(),
      formatReleaseStamp({ version: KGW_VERSION, repository: KGW_IMAGE_REPOSITORY, digest: DIGEST }),
    );
    const server = await startServer();
    try {
      expect(server.ports, server.stderr()).not.toBeNull();
      const issued = kgw(
        "tenant",
        "install-token",
        "acme",
        `--gateway-address=127.0.0.1:${server.ports!.agent}`,
        "--output=json",
      );
      expect(issued.status, issued.stderr).toBe(0);
      const { url } = (JSON.parse(issued.stdout) as { installToken: { url: string } }).installToken;
      const fetched = await fetchText(url);
      expect(fetched.status).toBe(200);
      expect(imageOf(fetched.body)).toBe(`${KGW_IMAGE_REPOSITORY}@${DIGEST}`);
    } finally {
      await server.stop();
    }
  });

  it("does not start with another release's stamp, and names the file", async () => {
    writeFileSync(
      stampFile(),
      formatReleaseStamp({ version: "9.9.9", repository: KGW_IMAGE_REPOSITORY, digest: DIGEST }),
    );
    const server = await startServer();
    await server.stop();
    expect(server.code).toBe(2);
    expect(server.stderr()).toContain(stampFile());
  });
});
