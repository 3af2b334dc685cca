/**
 * Frees the buffers an agent's dials leave behind with a cheap young-generation GC (a scavenge)
 * before V8's external-memory limit answers them with a mark-compact in the middle of a dial.
 *
 * Why: every read from the agent's TLS stream to its server arrives in a fresh 16 KiB ArrayBuffer
 * however few bytes it holds, and a dial takes several (DIAL_REQ, the first DATA, CLOSE_REQ).
 * A dial allocates little JavaScript, so the young generation seldom fills and no scavenge frees
 * them: external memory climbs until V8 starts a mark-compact, and the dials it lands on make
 * the dial rows' p99 (docs/PERFORMANCE.md, "The dial-tail regression, fixed"). The server runs
 * none: in that experiment a pacer in the server alone shortened no tail.
 *
 * Looked at on each dial, not on a timer: the growth comes from dials, and a transfer on an
 * open tunnel never looks. Forced scavenges during bulk transfers cost the gRPC and download
 * rows (they promote live HTTP/2 objects early; the pacer A/B in docs/PERFORMANCE.md), so they
 * must not be set off by traffic where V8 collects well by itself. A look reads one V8 counter
 * (about a microsecond); idle costs nothing. That counter adds a new buffer at once but takes a
 * freed one off only at a later collection: growth is then measured from where it fell to.
 */
import { getHeapStatistics } from "node:v8";
import { minorGc, SCAVENGE_AFTER_BYTES } from "./scavenge-pacer.js";

/** Scavenges once V8's external memory grew `afterBytes` since the last scavenge, looked at on demand. */
export class DialScavenger {
  private base: number;
  private due = false;

  constructor(
    /** Bytes of external memory V8 counts now (ArrayBuffers among them). */
    private readonly externalBytes: () => number,
    private readonly scavenge: () => void,
    private readonly afterBytes = SCAVENGE_AFTER_BYTES,
    /** Runs the scavenge after the work at hand (setImmediate), not inside the dial's handler. */
    private readonly soon: (run: () => void) => void = setImmediate,
  ) {
    this.base = externalBytes();
  }

  /** A dial arrived: look at external memory. */
  readonly look = (): void => {
    if (this.due) return;
    const now = this.externalBytes();
    // Memory that went down (V8 collected by itself) moves the base with it.
    if (now < this.base) {
      this.base = now;
      return;
    }
    if (now - this.base < this.afterBytes) return;
    this.due = true;
    this.soon(this.collect);
  };

  private readonly collect = (): void => {
    this.due = false;
    this.scavenge();
    this.base = this.externalBytes();
  };
}

/**
 * The scavenger `kgw agent` looks with on each dial. 4 MiB as the server's pacer: 16 MiB, fewer
 * and later scavenges, brought the dial tails back (docs/PERFORMANCE.md, the dial-tail fix).
 */
export function dialScavenger(): DialScavenger {
  return new DialScavenger(() => getHeapStatistics().external_memory, minorGc());
}
