/**
 * One reading of the server process: resident set (VmRSS), JavaScript heap (through the heap
 * probe, heap-probe.mjs), open file descriptors (/proc/<pid>/fd) and CPU time so far.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { Child } from "../harness/procs.js";
import { REPO_ROOT } from "../harness/repo.js";
import { sleep } from "../harness/util.js";

const PROBE = path.join(REPO_ROOT, "bench", "soak", "heap-probe.mjs");
/** How long the probe may take to answer; a server too busy for that is a finding in itself. */
const PROBE_TIMEOUT_MS = 5_000;
const PROBE_POLL_MS = 20;

export interface MemoryReading {
  rssKiB: number;
  /** Absent when the probe did not answer in time. */
  heapUsedKiB?: number;
  heapTotalKiB?: number;
  externalKiB?: number;
  fds: number;
  /** User + system CPU time of the server so far. */
  cpuSeconds: number;
}

/** The environment that preloads the probe into a Node process, writing into `dir`. */
export function probeEnv(dir: string): Record<string, string> {
  const inherited = process.env.NODE_OPTIONS ? `${process.env.NODE_OPTIONS} ` : "";
  return {
    NODE_OPTIONS: `${inherited}--import=${pathToFileURL(PROBE).href}`,
    KGW_SOAK_PROBE_DIR: dir,
  };
}

interface ProbeFile {
  seq: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
}

function readProbe(file: string): ProbeFile | undefined {
  return existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as ProbeFile) : undefined;
}

async function heap(child: Child, dir: string): Promise<ProbeFile | undefined> {
  const file = path.join(dir, `${child.pid}.json`);
  const before = readProbe(file)?.seq ?? 0;
  process.kill(child.pid, "SIGUSR2");
  const deadline = Date.now() + PROBE_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const now = readProbe(file);
    if (now && now.seq > before) return now;
    await sleep(PROBE_POLL_MS);
  }
  return undefined;
}

export async function readServer(child: Child, probeDir: string): Promise<MemoryReading> {
  const h = await heap(child, probeDir);
  const kib = (bytes: number | undefined) => (bytes === undefined ? undefined : Math.round(bytes / 1024));
  return {
    rssKiB: child.rssKiB(),
    heapUsedKiB: kib(h?.heapUsed),
    heapTotalKiB: kib(h?.heapTotal),
    externalKiB: kib(h?.external),
    fds: readdirSync(`/proc/${child.pid}/fd`).length,
    cpuSeconds: child.cpuSeconds(),
  };
}
