/**
 * Per-tenant metrics (kgw_tenant_*) with a bound on how many tenants get a label of their own.
 *
 * Every label value is a series per metric, and Prometheus pays for each one, so the first
 * `limit` tenants seen (--tenant-metrics-limit) are labelled with their id and any beyond are
 * counted together under tenant="_other" (not a possible tenant id: ids have no "_"). A
 * tenant's label is fixed while it is active on this instance (an agent connected, a dial or
 * tunnel open), so its counts never move between series mid-life. A labelled tenant that has
 * been idle for TENANT_SERIES_IDLE_MS loses its series and its place, which a new tenant may
 * then take; a deleted tenant's agents and tunnels are closed (tenant-policy.ts), so it goes
 * idle and its series go the same way.
 *
 * The data path adds bytes to plain numbers on its tenant's series (`toAgent`, `toClient`);
 * they reach prom-client when the registry is read, as TalliedCounter does.
 */
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import { TENANT_SERIES_IDLE_MS, TENANT_SERIES_SWEEP_MIN_INTERVAL_MS } from "../durations.js";
import { DIAL_OUTCOMES, type DialOutcome } from "./audit-record.js";

/** The label under which tenants beyond the limit are counted. */
export const OTHER_TENANTS = "_other";

/** The series of one label: one tenant's, or `_other`'s. Fields are the data path's to bump. */
export class TenantSeries {
  /** Bytes not yet handed to prom-client, caller → backend and backend → caller. */
  toAgent = 0;
  toClient = 0;
  tunnelsOpen = 0;
  agents = 0;
  /** Tenants active now under this label (one, or any number for `_other`). */
  users = 0;
  idleSince = 0;

  constructor(readonly label: string) {}
}

/** One tenant active on this instance: what keeps its label and series in place. */
interface ActiveTenant {
  series: TenantSeries;
  agents: number;
  /** Dials pending plus tunnels open. */
  dials: number;
}

export class TenantMetrics {
  /** Labels in use, by label (tenant id or `_other`): at most `limit` + 1. */
  private readonly series = new Map<string, TenantSeries>();
  /** Tenants with an agent, dial or tunnel here now: as many as there are, and no more. */
  private readonly active = new Map<string, ActiveTenant>();
  private lastSweep = 0;

  constructor(
    private readonly metrics: ServerMetrics,
    /** Tenants with a label of their own (--tenant-metrics-limit). */
    private readonly limit: number,
    private readonly now: () => number = Date.now,
  ) {
    metrics.onTenantCollect(() => this.collect());
  }

  /** Labels in use now, `_other` included; for tests. */
  get labels(): string[] {
    return [...this.series.keys()];
  }

  /** A dial of `tenant` begins: its series, held until `dialEnded`. */
  dialStarted(tenant: string): TenantSeries {
    const t = this.activate(tenant);
    t.dials++;
    return t.series;
  }

  /** The dial begun with `dialStarted(tenant)` ended with `outcome`. */
  dialEnded(tenant: string, outcome: DialOutcome): void {
    const t = this.active.get(tenant);
    if (!t) return;
    this.metrics.tenantDials.inc({ tenant: t.series.label, outcome });
    t.dials--;
    this.deactivateIfIdle(tenant, t);
  }

  /** `tenant` now has `count` agents connected to this instance. */
  agentsChanged(tenant: string, count: number): void {
    const t = count > 0 ? this.activate(tenant) : this.active.get(tenant);
    if (!t) return;
    t.series.agents += count - t.agents;
    t.agents = count;
    this.deactivateIfIdle(tenant, t);
  }

  private activate(tenant: string): ActiveTenant {
    let t = this.active.get(tenant);
    if (t) return t;
    const series = this.seriesFor(tenant);
    series.users++;
    t = { series, agents: 0, dials: 0 };
    this.active.set(tenant, t);
    return t;
  }

  private deactivateIfIdle(tenant: string, t: ActiveTenant): void {
    if (t.agents > 0 || t.dials > 0) return;
    this.active.delete(tenant);
    if (--t.series.users === 0) t.series.idleSince = this.now();
  }

  private seriesFor(tenant: string): TenantSeries {
    const own = this.series.get(tenant);
    if (own) return own;
    if (this.labelled() >= this.limit) this.sweep(false);
    const label = this.labelled() < this.limit ? tenant : OTHER_TENANTS;
    let series = this.series.get(label);
    if (!series) {
      series = new TenantSeries(label);
      this.series.set(label, series);
    }
    return series;
  }

  private labelled(): number {
    return this.series.size - (this.series.has(OTHER_TENANTS) ? 1 : 0);
  }

  /** Drops the series of labels idle for TENANT_SERIES_IDLE_MS (at most once a second unless forced). */
  private sweep(force: boolean): void {
    const now = this.now();
    if (!force && now - this.lastSweep < TENANT_SERIES_SWEEP_MIN_INTERVAL_MS) return;
    this.lastSweep = now;
    for (const s of this.series.values()) {
      if (s.users > 0 || now - s.idleSince < TENANT_SERIES_IDLE_MS) continue;
      this.flush(s);
      this.series.delete(s.label);
      this.removeSeries(s.label);
    }
  }

  private removeSeries(tenant: string): void {
    const m = this.metrics;
    for (const outcome of DIAL_OUTCOMES) m.tenantDials.remove({ tenant, outcome });
    m.tenantBytes.remove({ tenant, direction: "to_agent" });
    m.tenantBytes.remove({ tenant, direction: "to_client" });
    m.tenantTunnelsOpen.remove({ tenant });
    m.tenantAgents.remove({ tenant });
  }

  private flush(s: TenantSeries): void {
    if (s.toAgent > 0) {
      this.metrics.tenantBytes.inc({ tenant: s.label, direction: "to_agent" }, s.toAgent);
      s.toAgent = 0;
    }
    if (s.toClient > 0) {
      this.metrics.tenantBytes.inc({ tenant: s.label, direction: "to_client" }, s.toClient);
      s.toClient = 0;
    }
  }

  /** Called when the registry is read: bytes flushed, gauges set, idle series dropped. */
  private collect(): void {
    this.sweep(true);
    for (const s of this.series.values()) {
      this.flush(s);
      this.metrics.tenantTunnelsOpen.set({ tenant: s.label }, s.tunnelsOpen);
      this.metrics.tenantAgents.set({ tenant: s.label }, s.agents);
    }
  }
}
