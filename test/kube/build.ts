/**
 * Builds the Go programs the suite runs, from the Go module proxy only:
 *  - kube-apiserver from `k8s.io/kubernetes` (test/kube/go.mod pins the version and replaces each
 *    staging module with its published release);
 *  - upstream's proxy-agent and proxy-server, from the interop suite's module (test/interop/go.mod),
 *    so both suites test the same upstream release.
 * Each binary lands in `.cache/<name>-<key>/` (git-ignored), the key being a hash of the go.mod,
 * go.sum and flags it was built from: a later run with the same inputs does not even call `go`.
 * Cold, kube-apiserver takes about 5 minutes and 2 GB on 2 cores; the Go build cache makes a rebuild
 * after a cache-key change fast.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const KUBE_DIR = path.dirname(fileURLToPath(import.meta.url));
const INTEROP_DIR = path.join(KUBE_DIR, "..", "interop");
const CACHE_DIR = path.join(KUBE_DIR, ".cache");

/** The pinned version of a module in a go.mod (for test names and the ldflags). */
export function pinnedVersion(goModDir: string, module: string): string {
  const mod = fs.readFileSync(path.join(goModDir, "go.mod"), "utf8");
  return new RegExp(`^\\s*${module.replaceAll(".", "\\.")} (v\\S+)`, "m").exec(mod)?.[1] ?? "?";
}

export const KUBERNETES_VERSION = pinnedVersion(KUBE_DIR, "k8s.io/kubernetes");
export const ANP_VERSION = pinnedVersion(INTEROP_DIR, "sigs.k8s.io/apiserver-network-proxy");
export const KONNECTIVITY_CLIENT_IN_APISERVER = pinnedVersion(
  KUBE_DIR,
  "sigs.k8s.io/apiserver-network-proxy/konnectivity-client",
);

export interface Binaries {
  kubeApiserver: string;
  upstreamAgent: string;
  upstreamServer: string;
}

export async function buildBinaries(): Promise<Binaries> {
  // kube-apiserver reports this version (/version); without it, "v0.0.0-master".
  const [major, minor] = KUBERNETES_VERSION.replace(/^v/, "").split(".");
  const ldflags = [
    `-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION}`,
    `-X k8s.io/component-base/version.gitMajor=${major}`,
    `-X k8s.io/component-base/version.gitMinor=${minor}`,
  ].join(" ");
  const [kubeDir, anpDir] = await Promise.all([
    cachedBuild("kube-apiserver", KUBE_DIR, ["-ldflags", ldflags], ["k8s.io/kubernetes/cmd/kube-apiserver"]),
    cachedBuild(
      "anp",
      INTEROP_DIR,
      [],
      ["sigs.k8s.io/apiserver-network-proxy/cmd/agent", "sigs.k8s.io/apiserver-network-proxy/cmd/server"],
    ),
  ]);
  return {
    kubeApiserver: path.join(kubeDir, "kube-apiserver"),
    upstreamAgent: path.join(anpDir, "agent"),
    upstreamServer: path.join(anpDir, "server"),
  };
}

async function cachedBuild(name: string, moduleDir: string, flags: string[], packages: string[]) {
  const key = createHash("sha256")
    .update(fs.readFileSync(path.join(moduleDir, "go.mod")))
    .update(fs.readFileSync(path.join(moduleDir, "go.sum")))
    .update(JSON.stringify([flags, packages]))
    .digest("hex")
    .slice(0, 16);
  const outDir = path.join(CACHE_DIR, `${name}-${key}`);
  const done = path.join(outDir, ".complete");
  if (fs.existsSync(done)) return outDir;
  // Build into a fresh directory and rename it into place, so an interrupted build never counts.
  fs.mkdirSync(CACHE_DIR, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(CACHE_DIR, `.${name}-`));
  try {
    await goBuild(moduleDir, ["-o", `${tmp}${path.sep}`, ...flags, ...packages]);
    fs.writeFileSync(path.join(tmp, ".complete"), "");
    fs.rmSync(outDir, { recursive: true, force: true });
    fs.renameSync(tmp, outDir);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return outDir;
}

function goBuild(cwd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      "go",
      ["build", ...args],
      {
        cwd,
        env: {
          ...process.env,
          GOTOOLCHAIN: "local",
          GOFLAGS: "-mod=readonly -buildvcs=false",
          CGO_ENABLED: "0",
        },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, _stdout, stderr) =>
        err ? reject(new Error(`go build ${args.join(" ")} failed:\n${stderr}`)) : resolve(),
    );
  });
}
