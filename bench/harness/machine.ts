/** The machine description printed with every table. */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";
import { REPO_ROOT } from "./repo.js";
import type { MachineInfo } from "./types.js";
import { goVersion, pinnedUpstreamVersion } from "./upstream.js";

/** The hard limit on open files (Node raises its soft limit to it at startup; Go does too). */
export function fdLimit(): number {
  try {
    const limits = readFileSync("/proc/self/limits", "utf8");
    const m = /^Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/m.exec(limits);
    if (m) return m[2] === "unlimited" ? 1_048_576 : Number(m[2]);
  } catch {
    // not Linux
  }
  return 1024;
}

function commit(): string {
  try {
    const sha = execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      cwd: REPO_ROOT,
      encoding: "utf8",
    }).trim();
    const dirty = execFileSync("git", ["status", "--porcelain", "--", "lib", "services"], {
      cwd: REPO_ROOT,
      encoding: "utf8",
    }).trim();
    return dirty ? `${sha} + uncommitted changes in lib/ or services/` : sha;
  } catch {
    return "unknown";
  }
}

export async function describeMachine(withGo: boolean): Promise<MachineInfo> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? "unknown",
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    go: withGo ? await goVersion() : null,
    upstreamVersion: withGo ? pinnedUpstreamVersion() : null,
    fdLimit: fdLimit(),
    commit: commit(),
  };
}
