/**
 * Frees the data path's short-lived buffers with a cheap young-generation GC (a scavenge) before
 * V8's external-memory limit answers them with a mark-compact.
 *
 * Why: every TLS read arrives in a fresh 16 KiB ArrayBuffer that V8 counts as external memory.
 * Almost all die within microseconds, but a tunnel allocates too little JavaScript per chunk to
 * fill the young generation, so no scavenge runs to free them; external memory then climbs until
 * V8 starts a full mark-compact: about every 15-30 MB moved, 23-29% of server and agent CPU
 * (docs/PERFORMANCE.md). A scavenge of a young generation holding little else costs a fraction
 * of a millisecond and frees those buffers. Driven by ArrayBuffer growth, not by time alone: an
 * idle process never collects (it reads one counter a second).
 *
 * Measured (Node 24, CONNECT upload, loaded machine, docs/PERFORMANCE.md): mark-compacts per GB
 * moved 33 -> 15 (server; those left come mostly while a transfer starts, before the first busy
 * look) and 25 -> 0.6 (agent), server + agent CPU per MB 3,834 -> 2,868 µs, peak RSS lower.
 * Cost: one more V8 context for `gc` (created once), and a look a second when idle.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * How often ArrayBuffer memory is looked at while it grows (a transfer is on): at 300 MB/s,
 * 6 MB move between two looks.
 */
export const SCAVENGE_BUSY_CHECK_MS = 20;

/**
 * How often it is looked at otherwise: a timer every 20 ms cost an idle process about 4 ms of
 * CPU per second on a loaded 2-core machine; once a second costs nothing measurable, and a
 * transfer that starts is noticed within a second.
 */
export const SCAVENGE_IDLE_CHECK_MS = 1000;

/**
 * Growth of ArrayBuffer memory since the last scavenge that calls for one: well under the 15 MB
 * or so after which V8 started a mark-compact, well over what an interactive tunnel allocates
 * between two looks.
 */
export const SCAVENGE_AFTER_BYTES = 4 * 1024 * 1024;

/**
 * CPU used between two looks that means the process is moving data: look again soon. Not the
 * growth of ArrayBuffer memory itself: V8 frees as it goes, so the net change between two looks
 * can be nothing in the middle of a transfer. An idle process uses well under 1 ms a second.
 */
export const SCAVENGE_BUSY_CPU_MICROS = 2_000;

export interface ScavengeDeps {
  /** Bytes held in ArrayBuffers now (`process.memoryUsage().arrayBuffers`). */
  arrayBufferBytes: () => number;
  /** Runs a young-generation GC. */
  scavenge: () => void;
  /** CPU time this process has used, in microseconds (`process.cpuUsage()`, user + system). */
  cpuMicros: () => number;
}

/**
 * One look at a time: scavenges when ArrayBuffer memory grew by `afterBytes` since the last
 * scavenge, and says when to look next.
 */
export class ScavengePacer {
  private base: number;
  private lastCpu: number;

  constructor(
    private readonly deps: ScavengeDeps,
    private readonly afterBytes = SCAVENGE_AFTER_BYTES,
  ) {
    this.base = deps.arrayBufferBytes();
    this.lastCpu = deps.cpuMicros();
  }

  /** Milliseconds until the next look. */
  check(): number {
    const now = this.deps.arrayBufferBytes();
    const cpu = this.deps.cpuMicros();
    const busy = cpu - this.lastCpu >= SCAVENGE_BUSY_CPU_MICROS;
    this.lastCpu = cpu;
    // Memory that went down (a sweep, or a GC of V8's own) moves the base with it.
    if (now < this.base) this.base = now;
    if (now - this.base >= this.afterBytes) {
      this.deps.scavenge();
      this.base = this.deps.arrayBufferBytes();
    }
    return busy ? SCAVENGE_BUSY_CHECK_MS : SCAVENGE_IDLE_CHECK_MS;
  }
}

/** V8's `gc`, for young-generation collections only; not exposed to any other code. */
export function minorGc(): () => void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as (opts: { type: "minor" }) => void;
  return () => gc({ type: "minor" });
}

/** Starts pacing for this process (`kgw server`, `kgw agent`); returns the stop function. */
export function startScavengePacing(): () => void {
  const pacer = new ScavengePacer({
    arrayBufferBytes: () => process.memoryUsage().arrayBuffers,
    scavenge: minorGc(),
    cpuMicros: () => {
      const u = process.cpuUsage();
      return u.user + u.system;
    },
  });
  let timer: NodeJS.Timeout;
  const look = () => {
    timer = setTimeout(look, pacer.check());
    timer.unref();
  };
  timer = setTimeout(look, SCAVENGE_IDLE_CHECK_MS);
  timer.unref();
  return () => clearTimeout(timer);
}
