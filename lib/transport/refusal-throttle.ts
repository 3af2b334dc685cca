/**
 * Makes a source that keeps being refused cheap to refuse again.
 *
 * A CONNECT caller opens one TLS connection per tunnel (kube-apiserver's HTTPConnect mode does),
 * so every dial a tenant makes past its quota, or with a credential we refuse, still costs a full
 * mutual-TLS handshake before the refusal: about 4 ms of server CPU, the same as a dial that
 * succeeds. A tenant storming at its limits therefore took CPU from every other tenant
 * (docs/PERFORMANCE.md, the fairness scenario). Refusing earlier needs knowing earlier, and
 * before the handshake all we know is the source address; so a source that has earned more than
 * `threshold` refusals a second (a leaky bucket of that size, draining at that rate) is throttled:
 * it may start `handshakesPerSecond` new handshakes a second, and the rest of its connections are
 * reset at accept, which costs microseconds. Those it may still start get their answer (a 429 or
 * 401 says why), and while they are refused too the source stays throttled; `cooldownMs` after
 * its last refusal it is free again.
 *
 * Sources are counted by sourceKey (handshake-gate.ts). Many control planes behind one NAT share
 * an address, and so share its throttle: docs/CONFIGURATION.md says when to turn it off.
 * At most `maxSources` sources are remembered; past that, refusals of new sources are not
 * counted (the throttle fails open rather than evicting a source it is throttling).
 */

export interface RefusalThrottleOptions {
  /** Refusals a second a source may earn before it is throttled; 0 turns the throttle off. */
  threshold: number;
  /** New TLS handshakes a second a throttled source may still start (at least 1). */
  handshakesPerSecond: number;
  /** How long a source stays throttled after its last refusal. */
  cooldownMs: number;
  /** Sources remembered at once. */
  maxSources: number;
  now?: () => number;
}

interface SourceState {
  /** The leaky bucket of refusals, as of `at`. */
  refusals: number;
  at: number;
  /** Throttled until then (0: not throttled). */
  until: number;
  /** Handshakes the throttled source may still start, as of `at`. */
  tokens: number;
}

/** How often a full table may be swept for sources with nothing left to remember. */
const SWEEP_INTERVAL_MS = 1_000;

export class RefusalThrottle {
  private readonly sources = new Map<string, SourceState>();
  private readonly now: () => number;
  private lastSweep = Number.NEGATIVE_INFINITY;
  /** Refusals not counted because the table was full (for a metric). */
  untracked = 0;

  constructor(private readonly opts: RefusalThrottleOptions) {
    this.now = opts.now ?? Date.now;
  }

  get enabled(): boolean {
    return this.opts.threshold > 0;
  }

  /** Records a refusal of `source` (a sourceKey). */
  refused(source: string): void {
    if (!this.enabled) return;
    const now = this.now();
    let s = this.sources.get(source);
    if (!s) {
      if (this.sources.size >= this.opts.maxSources && !this.sweep(now)) {
        this.untracked++;
        return;
      }
      s = { refusals: 0, at: now, until: 0, tokens: 0 };
      this.sources.set(source, s);
    }
    this.advance(s, now);
    s.refusals++;
    if (s.until > now || s.refusals > this.opts.threshold) {
      // Entering (or staying in) the throttle: it starts with an empty allowance, so a storm's
      // next connection already waits its turn.
      if (s.until <= now) s.tokens = 0;
      s.until = now + this.opts.cooldownMs;
    }
  }

  /** Whether a new connection from `source` may start its TLS handshake. */
  admit(source: string): boolean {
    if (!this.enabled) return true;
    const s = this.sources.get(source);
    if (!s) return true;
    const now = this.now();
    this.advance(s, now);
    if (s.until <= now) return true;
    if (s.tokens < 1) return false;
    s.tokens--;
    return true;
  }

  /** Sources throttled right now (walks the table: for a metric's scrape, not a hot path). */
  throttledCount(): number {
    const now = this.now();
    let n = 0;
    for (const s of this.sources.values()) if (s.until > now) n++;
    return n;
  }

  get trackedCount(): number {
    return this.sources.size;
  }

  /** Drains the refusal bucket and refills the handshake allowance up to `now`. */
  private advance(s: SourceState, now: number): void {
    const seconds = Math.max(0, now - s.at) / 1000;
    s.at = now;
    s.refusals = Math.max(0, s.refusals - seconds * this.opts.threshold);
    const burst = Math.max(1, this.opts.handshakesPerSecond);
    s.tokens = Math.min(burst, s.tokens + seconds * this.opts.handshakesPerSecond);
  }

  /** Forgets sources neither throttled nor holding refusals; true if that made room. */
  private sweep(now: number): boolean {
    if (now - this.lastSweep < SWEEP_INTERVAL_MS) return false;
    this.lastSweep = now;
    for (const [key, s] of this.sources) {
      this.advance(s, now);
      if (s.until <= now && s.refusals === 0) this.sources.delete(key);
    }
    return this.sources.size < this.opts.maxSources;
  }
}
