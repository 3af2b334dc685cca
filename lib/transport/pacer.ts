/**
 * Hands out time slots at a fixed rate: each caller is told how long to wait for its turn, and no
 * two turns are closer than 1/rate. Unlike a token bucket, nobody is refused and asks again: a
 * caller sleeps once, until its slot, so the number of wake-ups is the number of slots however
 * many callers there are (the agents' periodic liveness probes, lib/server/core/agent-liveness.ts).
 * A pacer that was idle gives the next caller its slot at once. Pure: the clock is injected.
 */
export class Pacer {
  private next = Number.NEGATIVE_INFINITY;
  private readonly gapMs: number;

  constructor(
    perSecond: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!(perSecond > 0)) throw new RangeError(`pacer rate must be positive: ${perSecond}`);
    this.gapMs = 1000 / perSecond;
  }

  /**
   * Reserves the next slot no sooner than `afterMs` from now; returns how many ms from now it is
   * (0: now).
   */
  reserve(afterMs = 0): number {
    const now = this.now();
    const slot = Math.max(now + afterMs, this.next);
    this.next = slot + this.gapMs;
    return slot - now;
  }
}
