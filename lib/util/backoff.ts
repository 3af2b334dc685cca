/**
 * Exponential backoff with full jitter (each delay uniform in [0, ceiling], the ceiling doubling
 * from `baseMs` up to `capMs`). Full jitter matters here: when a server instance dies, every agent
 * it carried retries at once, and spreading the retries over the whole window keeps the
 * reconnect storm off the survivors.
 *
 * Pure: no timers; `random` is injected so tests are deterministic.
 *
 * In lib/util/ (the ground floor, beside errors and observability: it imports nothing) because
 * it belongs to no one side: the agent paces its reconnects with it, the registry's keepers
 * their retried writes, and a registry must not import the agent.
 */
export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  /** Uniform in [0, 1); Math.random by default. */
  random?: () => number;
}

export class Backoff {
  private attempt = 0;
  private readonly random: () => number;

  constructor(private readonly opts: BackoffOptions) {
    if (!(opts.baseMs > 0) || opts.capMs < opts.baseMs) {
      throw new RangeError(`backoff needs 0 < base (${opts.baseMs}) <= cap (${opts.capMs})`);
    }
    this.random = opts.random ?? Math.random;
  }

  /** The ceiling the next `next()` draws below: base·2^attempts, capped. */
  get ceilingMs(): number {
    // 2^attempt overflows to Infinity long after it passed any sane cap; Math.min handles that.
    return Math.min(this.opts.capMs, this.opts.baseMs * 2 ** this.attempt);
  }

  /** Delay before the next retry; each call widens the window for the one after. */
  next(): number {
    const delay = Math.floor(this.random() * this.ceilingMs);
    // Stop counting once the cap is reached so the exponent stays small.
    if (this.ceilingMs < this.opts.capMs) this.attempt++;
    return delay;
  }

  /** After a success: the next failure starts again from the base window. */
  reset(): void {
    this.attempt = 0;
  }
}
