/**
 * A token bucket: `ratePerSecond` tokens a second, up to `burst` saved up. Used to bound how many
 * new TLS handshakes a listener starts per second (handshake-gate.ts): a reconnect storm after an
 * instance dies then costs the survivors a bounded share of their CPU, and the connections over
 * the rate wait for a token before their handshake starts (or, with nowhere to wait, are reset
 * at accept, before TLS, which costs microseconds). Pure: the clock is injected.
 */
export interface TokenBucketOptions {
  /** Tokens added per second; must be positive. */
  ratePerSecond: number;
  /** Most tokens held at once (the burst allowed after a quiet spell); at least 1. */
  burst: number;
  /** Milliseconds, monotonic; performance.now by default. */
  now?: () => number;
}

export class TokenBucket {
  private tokens: number;
  private at: number;
  private readonly now: () => number;

  constructor(private readonly opts: TokenBucketOptions) {
    if (!(opts.ratePerSecond > 0))
      throw new RangeError(`token bucket rate must be positive: ${opts.ratePerSecond}`);
    if (!(opts.burst >= 1)) throw new RangeError(`token bucket burst must be at least 1: ${opts.burst}`);
    this.now = opts.now ?? (() => performance.now());
    this.tokens = opts.burst;
    this.at = this.now();
  }

  /** Takes one token if there is one; false (and nothing taken) otherwise. */
  take(): boolean {
    this.refill();
    if (this.tokens < 1) return false;
    this.tokens--;
    return true;
  }

  /** Milliseconds until a token is there to take (0 when one is). */
  msUntilToken(): number {
    this.refill();
    return this.tokens >= 1 ? 0 : ((1 - this.tokens) / this.opts.ratePerSecond) * 1000;
  }

  /** Tokens available now (fractional). */
  get available(): number {
    this.refill();
    return this.tokens;
  }

  private refill(): void {
    const now = this.now();
    const elapsed = Math.max(0, now - this.at);
    this.at = now;
    this.tokens = Math.min(this.opts.burst, this.tokens + (elapsed / 1000) * this.opts.ratePerSecond);
  }
}
