/**
 * This instance's view of the fleet's leases, re-read every heartbeat interval: which instances
 * are alive, where their peer ports are, and how many there are (serverCount). Lookups are
 * synchronous; a failed read keeps the last view (an outage must not make the fleet look empty).
 * Liveness is judged at each lookup by the clock while the view is fresh, so a lease that expires
 * stops counting on time; while the registry cannot be read it is judged as of the last good
 * read (`judgeAt`). Without that, every lease would expire by the clock a lease duration into a
 * DynamoDB outage (no instance can heartbeat then), routing would see no live owner anywhere and
 * every dial needing a peer hop would fail as "no agent": the opposite of serving what is known.
 * The same holds for `recoveryGraceMs` after the registry answers again: the other instances'
 * leases all expired during the outage and each needs a heartbeat (and this view a re-read) to
 * show it alive, and a dial in that gap must not find the fleet empty either.
 * A peer that really dies meanwhile is still avoided: its peer link fails (PeerLinks marks it).
 */
import { splitHostPort } from "../config/host-port.js";
import type { Logger } from "../observability/logger.js";
import type { FleetRegistry } from "../registry/fleet-registry.js";
import { isLeaseLive } from "../registry/liveness.js";
import type { InstanceLease } from "../registry/model.js";
import type { PeerInstance } from "./peer/peer-link.js";

/**
 * Intervals without a successful read of the leases after which the view counts as stale (its
 * read hangs): a read takes milliseconds and starts an interval after the last one ended.
 */
export const VIEW_STALE_REFRESHES = 2;

export interface InstanceViewOptions {
  registry: Pick<FleetRegistry, "listInstances">;
  refreshMs: number;
  log: Logger;
  clock?: () => number;
  /**
   * After reads fail and then succeed again, leases are still judged as of the last read before
   * the outage for this long: time for every live instance to heartbeat again (a lease duration).
   */
  recoveryGraceMs?: number;
  /** Told of each failed read (metrics). */
  failed?: (err: Error) => void;
  /** Told after each successful read (serverCount follows the fleet; peer links prune what it no longer names). */
  read?: () => void;
}

export class InstanceView {
  private leases = new Map<string, InstanceLease>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
  /** When the last successful read started (ms, the clock), and whether reads fail since. */
  private lastReadAt: number | null = null;
  private failing = false;
  /** Until when (the clock) leases are judged as of `judgedSince` after an outage. */
  private graceUntil = 0;
  private judgedSince = 0;
  private readonly clock: () => number;
  private stopped = false;

  constructor(private readonly opts: InstanceViewOptions) {
    this.clock = opts.clock ?? Date.now;
  }

  /** Reads once (a failure is logged, not thrown), then every refreshMs until stop(). */
  async start(): Promise<void> {
    await this.refresh();
    this.schedule();
  }

  /** Re-reads now; concurrent calls share one read. Never throws. */
  refresh(): Promise<void> {
    this.reading ??= (async () => {
      const startedAt = this.clock();
      try {
        const { items, unreadable } = await this.opts.registry.listInstances();
        this.leases = new Map(items.map((l) => [l.instanceId, l]));
        if (this.readsFailing && this.lastReadAt !== null) {
          this.judgedSince = this.lastReadAt;
          this.graceUntil = this.clock() + (this.opts.recoveryGraceMs ?? 0);
        }
        this.lastReadAt = startedAt;
        this.failing = false;
        for (const err of unreadable) this.opts.log.warn({ err: err.message }, "skipped an unreadable lease");
        this.opts.read?.();
      } catch (err) {
        this.failing = true;
        this.opts.failed?.(err as Error);
        this.opts.log.warn(
          { err: (err as Error).message },
          "cannot read the fleet's leases; keeping the last view",
        );
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  /** Every lease last read, live or not (liveOwners judges them). */
  all(): ReadonlyMap<string, InstanceLease> {
    return this.leases;
  }

  /**
   * The instant leases are judged at: now, or while reads fail (and for recoveryGraceMs after),
   * when the last good read before the outage began: what was live then is taken as live.
   */
  judgeAt(): number {
    if (this.readsFailing && this.lastReadAt !== null) return this.lastReadAt;
    const now = this.clock();
    return now < this.graceUntil ? this.judgedSince : now;
  }

  /** Instances alive and not draining, by the last read, judged at judgeAt(); `except` aside. */
  liveCount(except?: string): number {
    const now = this.judgeAt();
    let n = 0;
    for (const l of this.leases.values()) if (l.instanceId !== except && isLeaseLive(l, now)) n++;
    return n;
  }

  /**
   * Where instance `id`'s peer port is, and which incarnation listens there, if its lease was
   * read and names a usable address.
   */
  peer(id: string): PeerInstance | undefined {
    const lease = this.leases.get(id);
    if (!lease) return undefined;
    const hostPort = splitHostPort(lease.peerAddress);
    return hostPort && { id, incarnation: lease.incarnation, ...hostPort };
  }

  /**
   * Whether the registry is unreachable as far as the leases' reads show: the last one failed,
   * or none has succeeded for VIEW_STALE_REFRESHES intervals (a hung registry fails a read only
   * after the SDK's timeouts and retries, and the leases must not expire by the clock meanwhile).
   */
  get readsFailing(): boolean {
    if (this.failing) return true;
    return (
      this.lastReadAt !== null && this.clock() - this.lastReadAt > VIEW_STALE_REFRESHES * this.opts.refreshMs
    );
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.refresh().then(() => this.schedule());
    }, this.opts.refreshMs);
    this.timer.unref();
  }
}
