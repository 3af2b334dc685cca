/**
 * Which other instances hold a tenant's agents, as routing needs it: answered from memory on
 * every dial, read from the registry only on a miss, when an answer is older than ROUTE_FRESH_MS
 * (in the background: the dial goes on with what is known), and when a peer says "not here".
 * So a tenant's dials cost no registry call in the steady state, and at most one read per
 * ROUTE_FRESH_MS per instance while it is dialed (docs/REGISTRY.md, "Routing reads").
 *
 * What is kept are the rows as read; who is alive is judged at each lookup against the instance
 * view (liveOwners), so an instance whose lease expires or who starts draining drops out as soon
 * as the view shows it, without a re-read of every tenant.
 */
import type { FleetRegistry } from "../registry/fleet-registry.js";
import { liveOwners } from "../registry/liveness.js";
import type { OwnerRow } from "../registry/model.js";
import { ROUTE_FRESH_MS, ROUTE_IDLE_MS, ROUTE_NEGATIVE_FRESH_MS } from "../server/durations.js";
import type { InstanceView } from "./instance-view.js";

export type RouteRead = "miss" | "refresh" | "not_here";

export interface OwnerCacheOptions {
  registry: Pick<FleetRegistry, "ownersOf">;
  /** The leases last read, their re-read, and the instant to judge them at (InstanceView.judgeAt; default now). */
  instances: Pick<InstanceView, "all" | "refresh"> & Partial<Pick<InstanceView, "judgeAt">>;
  selfId: string;
  clock?: () => number;
  freshMs?: number;
  negativeFreshMs?: number;
  idleMs?: number;
  /** Told of each registry read, by why, and of each failure (metrics, logs). */
  read?: (why: RouteRead) => void;
  failed?: (err: Error) => void;
}

interface Entry {
  rows: readonly OwnerRow[];
  readAt: number;
  usedAt: number;
}

export class OwnerCache {
  private readonly entries = new Map<string, Entry>();
  private readonly reading = new Map<string, Promise<readonly string[]>>();
  private readonly clock: () => number;
  private readonly freshMs: number;
  private readonly negativeFreshMs: number;
  private readonly idleMs: number;
  private lastSweep: number;

  constructor(private readonly opts: OwnerCacheOptions) {
    this.clock = opts.clock ?? Date.now;
    this.freshMs = opts.freshMs ?? ROUTE_FRESH_MS;
    this.negativeFreshMs = opts.negativeFreshMs ?? ROUTE_NEGATIVE_FRESH_MS;
    this.idleMs = opts.idleMs ?? ROUTE_IDLE_MS;
    this.lastSweep = this.clock();
  }

  /**
   * The live instances (not this one) holding `tenant`'s agents, without I/O; undefined when
   * that is not known well enough to act on (never read, or "none" read too long ago): the
   * caller then awaits `read`. A stale answer starts a re-read in the background.
   */
  peek(tenant: string): readonly string[] | undefined {
    const now = this.clock();
    this.sweepIdle(now);
    const entry = this.entries.get(tenant);
    if (!entry) return undefined;
    entry.usedAt = now;
    const owners = this.liveOf(entry.rows, now);
    const age = now - entry.readAt;
    if (owners.length === 0 && age > this.negativeFreshMs) return undefined;
    if (age > this.freshMs) void this.read(tenant, "refresh").catch(() => {});
    return owners;
  }

  /** Reads `tenant`'s rows now (one read however many callers ask at once). */
  read(tenant: string, why: RouteRead): Promise<readonly string[]> {
    let pending = this.reading.get(tenant);
    if (!pending) {
      this.opts.read?.(why);
      pending = this.opts.registry
        .ownersOf(tenant)
        .then(async ({ items }) => {
          // A row naming an instance whose lease we have not read yet (it started after our
          // last read of the leases), or a newer incarnation of one (restarted in place): read
          // them now rather than take its agents for gone, or dial its predecessor.
          const known = this.opts.instances.all();
          const unread = (row: OwnerRow) => {
            const lease = known.get(row.instanceId);
            return lease === undefined || lease.incarnation < row.incarnation;
          };
          if (items.some(unread)) await this.opts.instances.refresh();
          const now = this.clock();
          const prior = this.entries.get(tenant);
          this.entries.set(tenant, { rows: items, readAt: now, usedAt: prior?.usedAt ?? now });
          return this.liveOf(items, now);
        })
        .catch((err: Error) => {
          this.opts.failed?.(err);
          throw err;
        })
        .finally(() => this.reading.delete(tenant));
      this.reading.set(tenant, pending);
    }
    return pending;
  }

  /** Tenants remembered now (for tests and metrics). */
  get size(): number {
    return this.entries.size;
  }

  private liveOf(rows: readonly OwnerRow[], now: number): string[] {
    const ids = new Set<string>();
    const at = this.opts.instances.judgeAt?.() ?? now;
    for (const row of liveOwners(rows, this.opts.instances.all(), at)) {
      if (row.instanceId !== this.opts.selfId) ids.add(row.instanceId);
    }
    return [...ids];
  }

  /** Forgets tenants nobody dialed for idleMs (at most once per idleMs, on a lookup). */
  private sweepIdle(now: number): void {
    if (now - this.lastSweep < this.idleMs) return;
    this.lastSweep = now;
    for (const [tenant, e] of this.entries) if (now - e.usedAt > this.idleMs) this.entries.delete(tenant);
  }
}
