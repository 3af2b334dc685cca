/**
 * Frees the short-lived buffers of CONNECT callers' reads with a cheap young-generation GC (a
 * scavenge) before V8's external-memory limit answers them with a mark-compact.
 *
 * Why: every read from a caller's TLS socket arrives in a fresh 16 KiB ArrayBuffer that V8
 * counts as external memory. Almost all die within microseconds, but a CONNECT tunnel allocates
 * too little JavaScript per chunk to fill the young generation, so no scavenge runs to free
 * them; external memory then climbs until V8 starts a full mark-compact, about every 15-30 MB a
 * caller uploads. A scavenge of a young generation holding little else costs a fraction of a
 * millisecond and frees those buffers.
 *
 * Driven by the bytes read where it pays, not by the process's ArrayBuffer memory: an earlier
 * pacer that scavenged whenever ArrayBuffer memory grew 4 MiB won CONNECT uploads and cost every
 * other throughput row (gRPC, downloads), where V8 collects cheaply by itself and a forced
 * scavenge only promotes the HTTP/2 and gRPC objects it finds in the young generation early
 * (docs/PERFORMANCE.md, the pacer A/B). Counting where the buffers come from also costs nothing
 * while idle: no timer, no look at memory.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * Bytes read between two scavenges: well under the 15 MB or so after which V8 started a
 * mark-compact, and a scavenge per 4 MiB is a small fraction of what moving them costs.
 */
export const SCAVENGE_AFTER_BYTES = 4 * 1024 * 1024;

/** Counts bytes read into fresh buffers and scavenges once every `afterBytes` of them. */
export class ScavengePacer {
  private bytes = 0;
  private due = false;

  constructor(
    private readonly scavenge: () => void,
    private readonly afterBytes = SCAVENGE_AFTER_BYTES,
    /**
     * Runs the scavenge after the reads at hand (setImmediate): after the poll phase, once this
     * batch of reads has been handed on, rather than in the middle of a "data" handler.
     */
    private readonly soon: (run: () => void) => void = setImmediate,
  ) {}

  /** Told of `bytes` just read into a fresh buffer (a CONNECT caller's chunk). */
  readonly read = (bytes: number): void => {
    this.bytes += bytes;
    if (this.due || this.bytes < this.afterBytes) return;
    this.due = true;
    this.soon(this.collect);
  };

  private readonly collect = (): void => {
    this.due = false;
    this.bytes = 0;
    this.scavenge();
  };
}

/** V8's `gc`, for young-generation collections only; not exposed to any other code. */
export function minorGc(): () => void {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as (opts: { type: "minor" }) => void;
  return () => gc({ type: "minor" });
}

/** The pacer `kgw server` counts its CONNECT callers' reads with. */
export function scavengePacer(): ScavengePacer {
  return new ScavengePacer(minorGc());
}
