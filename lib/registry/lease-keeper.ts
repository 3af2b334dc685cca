/**
 * Keeps this instance's lease: one write per heartbeat interval, whatever the number of agents.
 * The server asks it two things, synchronously: do we hold the lease (readiness, routing to
 * ourselves) and how healthy is the registry (metrics, the verbose readiness view).
 *
 * - `held()` errs on the safe side: it is true until LEASE_SAFETY_MARGIN_MS before the expiry
 *   the last successful heartbeat wrote, by the local clock, so this instance stops calling
 *   itself ready a little before any reader can count it dead.
 * - It never throws into its owner. A failing registry is retried with backoff, forever, and
 *   shows in `state()`; the only final outcome is "lost" (a newer incarnation of our id took
 *   the lease), which is emitted once and ends the heartbeats: this process has been replaced.
 * - "acquired" is emitted whenever a heartbeat succeeds while the lease was not held (the first
 *   one, and the first after an outage longer than the lease): the sweeper may have removed our
 *   rows meanwhile, so the OwnershipWriter re-claims them on it.
 */
import { EventEmitter } from "node:events";
import { Backoff } from "../util/backoff.js";
import {
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_LEASE_MS,
  HEARTBEAT_JITTER,
  HEARTBEAT_RETRY_BASE_MS,
  LEASE_SAFETY_MARGIN_MS,
  MIN_HEARTBEATS_PER_LEASE,
} from "./durations.js";
import { LeaseLostError } from "./errors.js";
import type { FleetRegistry } from "./fleet-registry.js";
import { checkCounter, checkInstanceId, checkPeerAddress } from "./keys.js";

export interface LeaseKeeperOptions {
  registry: FleetRegistry;
  instanceId: string;
  /** host:port other instances dial for peer links. */
  peerAddress: string;
  /** This process's start (ms); default: the clock when the keeper is made. */
  incarnation?: number;
  heartbeatMs?: number;
  /** At least MIN_HEARTBEATS_PER_LEASE heartbeats. */
  leaseMs?: number;
  /** Agents connected now, written with each heartbeat for operators. */
  agents?: () => number;
  /** ms since the epoch; Date.now by default. Leases are written and judged by it. */
  clock?: () => number;
  /** Uniform in [0, 1): jitter of intervals and backoff. */
  random?: () => number;
}

/** The keeper as metrics and the verbose readiness view see it. */
export interface LeaseState {
  readonly instanceId: string;
  readonly incarnation: number;
  readonly held: boolean;
  /** Until when (local clock) the lease counts as held; null before the first success. */
  readonly heldUntil: number | null;
  readonly draining: boolean;
  /** A newer incarnation of our id holds the lease: final. */
  readonly lost: boolean;
  readonly lastSuccessAt: number | null;
  /** The last failure, cleared by a success. */
  readonly lastError: Error | null;
  readonly consecutiveFailures: number;
  /** When the current run of failures began; null while healthy. */
  readonly failingSince: number | null;
  /** When the heartbeat in flight was sent (local clock); null when none is. */
  readonly outstandingSince: number | null;
}

/**
 * Whether an instance with this lease state may call itself ready. It holds its lease; or it
 * held one and the registry, not this instance, is what stopped it renewing: heartbeats failing,
 * or one outstanding since before the lease ran out. A hung registry is the same outage as a
 * refused one: every instance's lease runs out together and none can renew it, so judging by the
 * last good write keeps the fleet ready instead of failing every health check at once. A newer
 * incarnation holding our id (lost) ends it; a beat sent only after the lease ran out (this
 * process stalled, not the registry) does not count.
 */
export function readyOnLease(lease: LeaseState): boolean {
  if (lease.held) return true;
  if (lease.lost || lease.lastSuccessAt === null) return false;
  if (lease.consecutiveFailures > 0) return true;
  return (
    lease.outstandingSince !== null && lease.heldUntil !== null && lease.outstandingSince < lease.heldUntil
  );
}

export class LeaseKeeper extends EventEmitter {
  readonly instanceId: string;
  readonly incarnation: number;
  private readonly registry: FleetRegistry;
  private readonly peerAddress: string;
  private readonly heartbeatMs: number;
  private readonly leaseMs: number;
  private readonly agents: () => number;
  private readonly clock: () => number;
  private readonly random: () => number;
  private readonly backoff: Backoff;

  private heldUntil: number | null = null;
  private draining = false;
  private lost = false;
  private stopped = false;
  private started = false;
  private lastSuccessAt: number | null = null;
  private lastError: Error | null = null;
  private consecutiveFailures = 0;
  private failingSince: number | null = null;
  private outstandingSince: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** The heartbeat in flight: writes of one keeper never overlap. */
  private inFlight: Promise<void> | undefined;

  constructor(options: LeaseKeeperOptions) {
    super();
    this.registry = options.registry;
    this.instanceId = checkInstanceId(options.instanceId);
    this.peerAddress = checkPeerAddress(options.peerAddress);
    this.clock = options.clock ?? Date.now;
    this.random = options.random ?? Math.random;
    this.incarnation = checkCounter("incarnation", options.incarnation ?? this.clock());
    this.heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
    this.leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
    if (!(this.heartbeatMs > 0) || this.leaseMs < MIN_HEARTBEATS_PER_LEASE * this.heartbeatMs) {
      throw new RangeError(
        `a lease (${this.leaseMs}ms) must last at least ${MIN_HEARTBEATS_PER_LEASE} heartbeats (${this.heartbeatMs}ms)`,
      );
    }
    if (this.leaseMs <= LEASE_SAFETY_MARGIN_MS) {
      throw new RangeError(`a lease must be longer than the ${LEASE_SAFETY_MARGIN_MS}ms safety margin`);
    }
    this.agents = options.agents ?? (() => 0);
    this.backoff = new Backoff({
      baseMs: Math.min(HEARTBEAT_RETRY_BASE_MS, this.heartbeatMs),
      capMs: this.heartbeatMs,
      random: this.random,
    });
  }

  /** Starts heartbeating at once. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.tick();
  }

  /** Whether this instance holds its lease now, by the local clock, erring on the safe side. */
  held(): boolean {
    return !this.lost && this.heldUntil !== null && this.clock() < this.heldUntil;
  }

  state(): LeaseState {
    return {
      instanceId: this.instanceId,
      incarnation: this.incarnation,
      held: this.held(),
      heldUntil: this.heldUntil,
      draining: this.draining,
      lost: this.lost,
      lastSuccessAt: this.lastSuccessAt,
      lastError: this.lastError,
      consecutiveFailures: this.consecutiveFailures,
      failingSince: this.failingSince,
      outstandingSince: this.outstandingSince,
    };
  }

  /**
   * Marks the instance draining and writes it at once, so readers route elsewhere without
   * waiting for the next heartbeat. Resolves when written or failed (see state()); never rejects.
   */
  async setDraining(): Promise<void> {
    this.draining = true;
    if (!this.started || this.stopped || this.lost) return;
    await this.beatNow();
  }

  /** Stops heartbeating and ends the lease (best effort, bounded by the client's timeouts). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    await this.inFlight;
    if (!this.started || this.lost) return;
    this.heldUntil = null;
    try {
      await this.registry.releaseLease(this.instanceId, this.incarnation, this.clock());
    } catch (err) {
      // Unreachable: the lease simply expires (readers ignore it after expiresAt).
      this.fail(err);
    }
  }

  override on(event: "acquired", listener: () => void): this;
  override on(event: "lost", listener: (err: LeaseLostError) => void): this;
  override on(event: "failure", listener: (err: Error) => void): this;
  override on(event: string, listener: (...args: never[]) => void): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  /** Writes a heartbeat now, after the one in flight if any. */
  private async beatNow(): Promise<void> {
    while (this.inFlight) await this.inFlight;
    if (this.stopped || this.lost) return;
    clearTimeout(this.timer);
    await this.run();
    this.schedule();
  }

  private tick(): void {
    if (this.stopped || this.lost) return;
    void this.run().then(() => this.schedule());
  }

  /** One heartbeat, recorded as the one in flight until it settles (it never rejects). */
  private run(): Promise<void> {
    this.outstandingSince = this.clock();
    const p: Promise<void> = this.beat().finally(() => {
      this.outstandingSince = null;
      if (this.inFlight === p) this.inFlight = undefined;
    });
    this.inFlight = p;
    return p;
  }

  private schedule(): void {
    if (this.stopped || this.lost) return;
    clearTimeout(this.timer);
    const delay =
      this.consecutiveFailures > 0
        ? this.backoff.next()
        : this.heartbeatMs * (1 - HEARTBEAT_JITTER * this.random());
    this.timer = setTimeout(() => this.tick(), delay);
  }

  private async beat(): Promise<void> {
    const now = this.clock();
    const wasHeld = this.held();
    const expiresAt = now + this.leaseMs;
    try {
      await this.registry.heartbeat({
        instanceId: this.instanceId,
        peerAddress: this.peerAddress,
        incarnation: this.incarnation,
        heartbeatAt: now,
        expiresAt,
        draining: this.draining,
        agents: this.agents(),
      });
    } catch (err) {
      if (err instanceof LeaseLostError) {
        this.lost = true;
        this.heldUntil = null;
        this.fail(err);
        try {
          this.emit("lost", err);
        } catch {
          // The owner's handler failed; the keeper has nothing left to do either way.
        }
        return;
      }
      this.fail(err);
      return;
    }
    if (this.stopped) return;
    // The expiry we computed before sending is the one stored: the local deadline can only be
    // earlier than what readers see, never later.
    this.heldUntil = expiresAt - LEASE_SAFETY_MARGIN_MS;
    this.lastSuccessAt = this.clock();
    this.lastError = null;
    this.consecutiveFailures = 0;
    this.failingSince = null;
    this.backoff.reset();
    if (!wasHeld) {
      // A listener's bug must not stop the heartbeats: it is reported like a failed write.
      try {
        this.emit("acquired");
      } catch (err) {
        this.fail(err);
      }
    }
  }

  private fail(err: unknown): void {
    const error = err instanceof Error ? err : new Error(String(err));
    this.lastError = error;
    this.consecutiveFailures++;
    this.failingSince ??= this.clock();
    try {
      if (this.listenerCount("failure") > 0) this.emit("failure", error);
    } catch {
      // Reporting is best effort; the state above already says it.
    }
  }
}
