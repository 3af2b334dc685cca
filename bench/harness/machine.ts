/** The machine description printed with every table. */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { childProcessGroups } from "./procs.js";
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

export interface CpuSnapshot {
  /**
   * Busy CPU time of the whole machine, steal time, and CPU time of the benchmark: this process,
   * its reaped children, and every live process in one of its children's process groups, all in
   * seconds.
   */
  busy: number;
  steal: number;
  ours: number;
  at: number;
}

/** USER_HZ: /proc reports CPU times in ticks of 1/100 s on Linux. */
const TICKS_PER_SECOND = 100;

/** The fields of /proc/<pid>/stat after the command name: [2] is the process group, [11..14]
 * utime, stime, cutime, cstime (the last two: reaped children). */
function statFields(pid: number | "self"): number[] {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat
    .slice(stat.lastIndexOf(")") + 2)
    .split(" ")
    .map(Number);
}

const cpuTicks = (f: number[]): number => f[11]! + f[12]! + f[13]! + f[14]!;

/**
 * CPU ticks of live processes in `groups`. A child's own time is not in this process's cutime
 * until it is reaped, so a live child is counted here; once reaped it is in cutime instead, and
 * the sum stays continuous.
 */
function liveGroupTicks(groups: ReadonlySet<number>): number {
  if (groups.size === 0) return 0;
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      const f = statFields(pid);
      if (groups.has(f[2]!)) ticks += cpuTicks(f);
    } catch {
      // exited meanwhile
    }
  }
  return ticks;
}

/** /proc/stat, /proc/self/stat and the stat of every process of the benchmark's children. */
export function cpuSnapshot(): CpuSnapshot {
  const at = Date.now();
  try {
    const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, , , irq, softirq, steal] = cpu;
    const ours = cpuTicks(statFields("self")) + liveGroupTicks(new Set(childProcessGroups()));
    return {
      busy: (user! + nice! + system! + irq! + softirq!) / TICKS_PER_SECOND,
      steal: (steal ?? 0) / TICKS_PER_SECOND,
      ours: ours / TICKS_PER_SECOND,
      at,
    };
  } catch {
    return { busy: 0, steal: 0, ours: 0, at };
  }
}

/** Cores used by other processes, and cores stolen, between two snapshots. */
export function otherLoad(a: CpuSnapshot, b: CpuSnapshot): { other: number; steal: number } {
  const wall = Math.max(0.001, (b.at - a.at) / 1000);
  return {
    other: Math.max(0, (b.busy - a.busy - (b.ours - a.ours)) / wall),
    steal: (b.steal - a.steal) / wall,
  };
}

/** `upstream`: whether the upstream column is on (its version is then part of the description). */
export async function describeMachine(upstream: boolean): Promise<MachineInfo> {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() ?? "unknown",
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    kernel: os.release(),
    node: process.version,
    go: await goVersion(),
    upstreamVersion: upstream ? pinnedUpstreamVersion() : null,
    fdLimit: fdLimit(),
    commit: commit(),
  };
}
