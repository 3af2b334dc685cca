/**
 * Removes what dead instances left: every so often (jittered, about once per lease duration per
 * instance, so a fleet sweeps several times per lease), it lists the leases, and for each one
 * expired more than the grace period ago deletes the instance's ownership rows (each fenced by
 * its own incarnation and session, so a row rewritten since is kept), then the lease (fenced by
 * the heartbeat it read, so a lease renewed since is kept). Rows first: a sweeper that dies
 * half-way leaves the expired lease for the next one to find.
 *
 * Any number of instances may sweep at once; the conditions make them agree. Correctness never
 * depends on it: readers ignore expired instances' rows from the expiry on (liveness.ts).
 */
import { EventEmitter } from "node:events";
import { DEFAULT_LEASE_MS, DEFAULT_SWEEP_GRACE_MS } from "./durations.js";
import { type FleetRegistry, sweepOwnerRows } from "./fleet-registry.js";
import { checkInstanceId } from "./keys.js";
import { sweepable } from "./liveness.js";

export interface SweeperOptions {
  registry: FleetRegistry;
  /** Ours: never swept by ourselves (our keeper will renew it or report it lost). */
  instanceId: string;
  /** Mean interval between sweeps; default the lease duration. Each is drawn from [0.5, 1.5]×. */
  intervalMs?: number;
  graceMs?: number;
  clock?: () => number;
  random?: () => number;
}

export interface SweepReport {
  /** Instances whose rows and lease were removed. */
  readonly instances: readonly string[];
  readonly rows: number;
  /** Items that could not be read (skipped). */
  readonly unreadable: readonly Error[];
}

export class Sweeper extends EventEmitter {
  private readonly registry: FleetRegistry;
  private readonly instanceId: string;
  private readonly intervalMs: number;
  private readonly graceMs: number;
  private readonly clock: () => number;
  private readonly random: () => number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = false;
  /** When the registry last failed this sweeper (the clock), if ever. */
  private failedAt: number | null = null;

  constructor(options: SweeperOptions) {
    super();
    this.registry = options.registry;
    this.instanceId = checkInstanceId(options.instanceId);
    this.intervalMs = options.intervalMs ?? DEFAULT_LEASE_MS;
    this.graceMs = options.graceMs ?? DEFAULT_SWEEP_GRACE_MS;
    this.clock = options.clock ?? Date.now;
    this.random = options.random ?? Math.random;
  }

  start(): void {
    this.schedule();
  }

  /** Stops sweeping; waits for a sweep in progress. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /**
   * One sweep. Throws RegistryUnavailableError if the leases cannot be listed. Sweeps nothing
   * until `graceMs` after its last failure: when the registry comes back from an outage, every
   * lease in it has expired (nobody could heartbeat), and the live instances need a moment to
   * renew theirs before anyone may take them for dead and delete their rows.
   */
  async sweepOnce(): Promise<SweepReport> {
    let listing: Awaited<ReturnType<FleetRegistry["listInstances"]>>;
    try {
      listing = await this.registry.listInstances();
    } catch (err) {
      this.failedAt = this.clock();
      throw err;
    }
    const unreadable = [...listing.unreadable];
    if (this.failedAt !== null && this.clock() - this.failedAt < this.graceMs) {
      return { instances: [], rows: 0, unreadable };
    }
    const dead = sweepable(listing.items, this.clock(), this.graceMs).filter(
      (l) => l.instanceId !== this.instanceId,
    );
    const instances: string[] = [];
    let rows = 0;
    for (const lease of dead) {
      const swept = await sweepOwnerRows(this.registry, lease.instanceId, lease.incarnation + 1);
      rows += swept.removed;
      unreadable.push(...swept.unreadable);
      if (await this.registry.removeLease(lease)) instances.push(lease.instanceId);
    }
    return { instances, rows, unreadable };
  }

  override on(event: "swept", listener: (report: SweepReport) => void): this;
  override on(event: "failure", listener: (err: Error) => void): this;
  override on(event: string, listener: (...args: never[]) => void): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  private schedule(): void {
    if (this.stopped) return;
    const delay = this.intervalMs * (0.5 + this.random());
    this.timer = setTimeout(() => {
      const run = this.sweepOnce().then(
        (report) => this.emitSafely("swept", report),
        (err: unknown) => this.emitSafely("failure", err instanceof Error ? err : new Error(String(err))),
      );
      this.running = run;
      void run.finally(() => this.schedule());
    }, delay);
  }

  private emitSafely(event: string, arg: unknown): void {
    try {
      if (this.listenerCount(event) > 0) this.emit(event, arg);
    } catch {
      // A listener's bug does not stop the sweeps.
    }
  }
}
