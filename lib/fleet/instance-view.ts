/**
 * This instance's view of the fleet's leases, re-read every heartbeat interval: which instances
 * are alive, where their peer ports are, and how many there are (serverCount). Lookups are
 * synchronous; a failed read keeps the last view (an outage must not make the fleet look empty),
 * and liveness is judged at each lookup by the clock, so a lease that expires while the registry
 * is unreachable still stops counting on time.
 */
import { splitHostPort } from "../config/host-port.js";
import type { Logger } from "../observability/logger.js";
import type { FleetRegistry } from "../registry/fleet-registry.js";
import { isLeaseLive } from "../registry/liveness.js";
import type { InstanceLease } from "../registry/model.js";
import type { PeerInstance } from "./peer/peer-links.js";

export interface InstanceViewOptions {
  registry: Pick<FleetRegistry, "listInstances">;
  refreshMs: number;
  log: Logger;
  clock?: () => number;
  /** Told of each failed read (metrics). */
  failed?: (err: Error) => void;
}

export class InstanceView {
  private leases = new Map<string, InstanceLease>();
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> | undefined;
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
      try {
        const { items, unreadable } = await this.opts.registry.listInstances();
        this.leases = new Map(items.map((l) => [l.instanceId, l]));
        for (const err of unreadable) this.opts.log.warn({ err: err.message }, "skipped an unreadable lease");
      } catch (err) {
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

  /** Instances alive and not draining now, by the last read and the clock. */
  liveCount(): number {
    const now = this.clock();
    let n = 0;
    for (const l of this.leases.values()) if (isLeaseLive(l, now)) n++;
    return n;
  }

  /** Where instance `id`'s peer port is, if its lease was read and names a usable address. */
  peer(id: string): PeerInstance | undefined {
    const lease = this.leases.get(id);
    if (!lease) return undefined;
    const hostPort = splitHostPort(lease.peerAddress);
    return hostPort && { id, ...hostPort };
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
