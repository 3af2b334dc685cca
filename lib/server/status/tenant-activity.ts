/**
 * What each tenant's dials did on this instance over the last minutes, for the status API: a
 * small ring of per-minute buckets per tenant (counts by outcome and by failure reason), the
 * last failure, and the tunnels open now. In memory only; a dial costs a map increment when it
 * ends, never a registry write.
 *
 * Bounded: STATUS_WINDOW_MS / STATUS_BUCKET_MS buckets per tenant, each with at most one entry
 * per outcome and per error code (both fixed sets), and at most `maxTenants` tenants: only
 * authenticated callers' dials are counted, so the tenants are the store's, but a store with
 * more than that many tenants active at once loses the least recently active one's history.
 */
import type { DialOutcome } from "../audit/audit-record.js";
import { STATUS_BUCKET_MS, STATUS_WINDOW_MS } from "../durations.js";
import type { LastError, RecentActivity } from "./status-model.js";

/** Tenants whose history is kept: far beyond the tenants one gateway serves at once. */
export const MAX_STATUS_TENANTS = 10_000;

interface Bucket {
  /** The minute it counts (ms since the epoch / STATUS_BUCKET_MS). */
  minute: number;
  dials: Map<DialOutcome, number>;
  failures: Map<string, number>;
}

interface TenantHistory {
  buckets: Bucket[];
  lastError: LastError | null;
  openTunnels: number;
}

/** The dial outcomes that are not a failure the tenant would want explained (a drain is a rollout). */
const WELL_ENDED: ReadonlySet<DialOutcome> = new Set(["ok", "cancelled", "drained"]);

const BUCKETS = Math.ceil(STATUS_WINDOW_MS / STATUS_BUCKET_MS);

export interface DialEnd {
  outcome: DialOutcome;
  code: string | null;
  dialId: string;
}

export class TenantActivity {
  /** Insertion order is recency: a tenant is moved to the end when it dials. */
  private readonly tenants = new Map<string, TenantHistory>();

  constructor(
    private readonly instance: string,
    private readonly now: () => number = Date.now,
    private readonly maxTenants = MAX_STATUS_TENANTS,
  ) {}

  /** A tunnel of `tenant` opened (+1) or closed (-1) through this instance. */
  tunnel(tenant: string, delta: 1 | -1): void {
    const h = this.history(tenant);
    h.openTunnels = Math.max(0, h.openTunnels + delta);
  }

  /** A dial of `tenant` ended. */
  dialEnded(tenant: string, end: DialEnd): void {
    const at = this.now();
    const h = this.history(tenant);
    const bucket = this.bucket(h, at);
    bucket.dials.set(end.outcome, (bucket.dials.get(end.outcome) ?? 0) + 1);
    if (WELL_ENDED.has(end.outcome)) return;
    const reason = end.code ?? "unknown";
    bucket.failures.set(reason, (bucket.failures.get(reason) ?? 0) + 1);
    h.lastError = {
      at: new Date(at).toISOString(),
      code: end.code,
      outcome: end.outcome,
      dialId: end.dialId,
      instance: this.instance,
    };
  }

  /** Tenants with any history here. */
  tenantIds(): string[] {
    return [...this.tenants.keys()];
  }

  openTunnels(tenant: string): number {
    return this.tenants.get(tenant)?.openTunnels ?? 0;
  }

  lastError(tenant: string): LastError | null {
    return this.tenants.get(tenant)?.lastError ?? null;
  }

  /** The tenant's counts over the window, the buckets older than it left out. */
  recent(tenant: string): RecentActivity {
    const dials: Partial<Record<DialOutcome, number>> = {};
    const failures: Record<string, number> = {};
    const h = this.tenants.get(tenant);
    const oldest = Math.floor(this.now() / STATUS_BUCKET_MS) - BUCKETS + 1;
    for (const b of h?.buckets ?? []) {
      if (b.minute < oldest) continue;
      for (const [k, n] of b.dials) dials[k] = (dials[k] ?? 0) + n;
      for (const [k, n] of b.failures) failures[k] = (failures[k] ?? 0) + n;
    }
    return { windowMinutes: BUCKETS, dials, failures };
  }

  private history(tenant: string): TenantHistory {
    let h = this.tenants.get(tenant);
    if (h) {
      this.tenants.delete(tenant);
      this.tenants.set(tenant, h);
      return h;
    }
    h = { buckets: [], lastError: null, openTunnels: 0 };
    this.tenants.set(tenant, h);
    if (this.tenants.size > this.maxTenants) this.evictOne();
    return h;
  }

  /** The least recently active tenant with no tunnel open goes (one with tunnels is active). */
  private evictOne(): void {
    for (const [id, h] of this.tenants) {
      if (h.openTunnels > 0) continue;
      this.tenants.delete(id);
      return;
    }
  }

  private bucket(h: TenantHistory, at: number): Bucket {
    const minute = Math.floor(at / STATUS_BUCKET_MS);
    const last = h.buckets[h.buckets.length - 1];
    if (last && last.minute === minute) return last;
    const b: Bucket = { minute, dials: new Map(), failures: new Map() };
    h.buckets.push(b);
    // The ring: never more buckets than the window holds.
    while (h.buckets.length > BUCKETS || (h.buckets[0] && h.buckets[0].minute <= minute - BUCKETS)) {
      h.buckets.shift();
    }
    return b;
  }
}
