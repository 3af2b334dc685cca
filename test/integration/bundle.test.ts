/**
 * The bundle (dist/bundle/, scripts/bundle.mjs) is all the image ships besides package.json and
 * bin/ (Dockerfile): no node_modules. It must therefore import nothing but Node's own modules, and
 * a copy of it alone must run a server.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { builtinModules } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BUNDLE_DIR } from "../helpers/bundle-sources.js";
import { announcedPorts, httpGet } from "../helpers/endpoints.js";
import { waitUntil } from "../helpers/fleet.js";
import { REPO, requireBuild, runProcess } from "../helpers/kgw-bin.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

let root: string;
let pki: TestPki;
let baseline: Map<string, number>;
beforeAll(async () => {
  requireBuild();
  baseline = activeResources();
  pki = await getTestPki();
  // The image's /opt/kgw: package.json, bin/ and dist/bundle/, nothing else.
  root = mkdtempSync(path.join(tmpdir(), "kgw-bundle-"));
  cpSync(path.join(REPO, "package.json"), path.join(root, "package.json"));
  cpSync(path.join(REPO, "bin"), path.join(root, "bin"), { recursive: true });
  cpSync(BUNDLE_DIR, path.join(root, "dist", "bundle"), { recursive: true });
});
afterAll(async () => {
  rmSync(root, { recursive: true, force: true });
  await expectNoLeakedResources(baseline);
});

describe("the bundle", () => {
  it("imports nothing but Node's own modules", () => {
    const meta = JSON.parse(readFileSync(path.join(BUNDLE_DIR, "meta.json"), "utf8")) as {
      outputs: Record<string, { imports: { path: string; external?: boolean }[] }>;
    };
    const builtins = new Set(builtinModules.flatMap((m) => [m, `node:${m}`]));
    const external = Object.values(meta.outputs).flatMap((o) =>
      o.imports.filter((i) => i.external).map((i) => i.path),
    );
    expect(external.length).toBeGreaterThan(0);
    expect([...new Set(external)].filter((p) => !builtins.has(p))).toEqual([]);
  });

  it("alone (no node_modules) runs each command's help and a server that serves /healthz", async () => {
    const bin = path.join(root, "bin", "kgw.js");
    for (const command of ["server", "agent", "tenant", "pki", "status"]) {
      const r = await runProcess(process.execPath, [bin, command, "--help"]);
      expect({ command, code: r.code, err: r.err }).toEqual({ command, code: 0, err: "" });
    }
    const portsFile = path.join(root, "ports.json");
    const server: ChildProcess = spawn(
      process.execPath,
      [
        bin,
        "server",
        "--agent-port=0",
        "--server-port=0",
        "--admin-port=0",
        "--health-port=0",
        `--cluster-cert=${pki.files.serverCert}`,
        `--cluster-key=${pki.files.serverKey}`,
        `--server-cert=${pki.files.serverCert}`,
        `--server-key=${pki.files.serverKey}`,
        `--server-ca-cert=${pki.files.caCert}`,
        `--ports-file=${portsFile}`,
        "--log-level=warn",
      ],
      { cwd: root, env: { ...process.env, KGW_AGENT_TOKEN: "t".repeat(40) }, stdio: "ignore" },
    );
    const exited = new Promise<number | null>((resolve) => server.once("exit", resolve));
    try {
      await waitUntil(() => announcedPorts(portsFile) !== null, 15_000, "the server announces its ports");
      const ports = announcedPorts(portsFile)!;
      expect((await httpGet(`127.0.0.1:${ports.health}`, "/healthz")).status).toBe(200);
    } finally {
      server.kill("SIGTERM");
    }
    expect(await exited).toBe(0);
  });
});
