/**
 * The upstream column: proxy-server and proxy-agent of kubernetes-sigs/apiserver-network-proxy,
 * built unchanged from the published Go module pinned in test/interop/go.mod (the module the
 * interop suite uses; the benchmark only reads it).
 *
 * Binaries the interop suite already built (test/interop/.cache/bin) are reused when they are
 * newer than go.mod and go.sum; otherwise `go build` writes them under
 * node_modules/.cache/kgw-bench/bin (git-ignored), never into test/interop.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./repo.js";

export const INTEROP_DIR = path.join(REPO_ROOT, "test", "interop");
const INTEROP_BIN = path.join(INTEROP_DIR, ".cache", "bin");
export const OWN_BIN = path.join(REPO_ROOT, "node_modules", ".cache", "kgw-bench", "bin");

const PACKAGES = [
  "sigs.k8s.io/apiserver-network-proxy/cmd/agent",
  "sigs.k8s.io/apiserver-network-proxy/cmd/server",
];

export interface UpstreamBinaries {
  agent: string;
  server: string;
  /** ANP version, from go.mod. */
  version: string;
}

export function run(cmd: string, args: string[], cwd: string, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      {
        cwd,
        timeout: timeoutMs,
        maxBuffer: 16 * 1024 * 1024,
        env: {
          ...process.env,
          GOTOOLCHAIN: "local",
          GOFLAGS: "-mod=readonly -buildvcs=false",
          CGO_ENABLED: "0",
        },
      },
      (err, stdout, stderr) =>
        err ? reject(new Error(`${cmd} ${args.join(" ")}: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
}

/** `go version`, or null when go is not on the PATH. */
export async function goVersion(): Promise<string | null> {
  try {
    return (await run("go", ["version"], REPO_ROOT, 10_000)).trim();
  } catch {
    return null;
  }
}

export function pinnedUpstreamVersion(): string | null {
  try {
    const mod = readFileSync(path.join(INTEROP_DIR, "go.mod"), "utf8");
    return /^\s*sigs\.k8s\.io\/apiserver-network-proxy (v\S+)/m.exec(mod)?.[1] ?? null;
  } catch {
    return null;
  }
}

function newerThanModule(bin: string): boolean {
  if (!existsSync(bin)) return false;
  const t = statSync(bin).mtimeMs;
  return ["go.mod", "go.sum"].every((f) => statSync(path.join(INTEROP_DIR, f)).mtimeMs <= t);
}

/** Locates or builds the upstream binaries. Cold builds take minutes; warm ones a second. */
export async function upstreamBinaries(log: (m: string) => void): Promise<UpstreamBinaries> {
  const version = pinnedUpstreamVersion();
  if (!version) throw new Error(`no apiserver-network-proxy version in ${path.join(INTEROP_DIR, "go.mod")}`);
  const reuse = { agent: path.join(INTEROP_BIN, "agent"), server: path.join(INTEROP_BIN, "server") };
  if (newerThanModule(reuse.agent) && newerThanModule(reuse.server)) return { ...reuse, version };
  mkdirSync(OWN_BIN, { recursive: true });
  log(`building upstream proxy-server and proxy-agent ${version} (go build; minutes when cold)`);
  await run("go", ["build", "-o", `${OWN_BIN}${path.sep}`, ...PACKAGES], INTEROP_DIR, 15 * 60_000);
  return { agent: path.join(OWN_BIN, "agent"), server: path.join(OWN_BIN, "server"), version };
}
