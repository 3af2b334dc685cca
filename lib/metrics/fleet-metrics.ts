/**
 * The fleet's metrics (lib/fleet/), in the gateway's registry beside its own. Registry calls are
 * counted where they leave the process (one per DynamoDB request, retries included), so
 * "calls per dial" and "calls at rest" can be read straight off a running fleet.
 */
import { Counter, Gauge } from "prom-client";
import type { ServerMetrics } from "./server-metrics.js";

export class FleetMetrics {
  private collect: () => void = () => {};

  readonly registryRequests: Counter<"operation">;
  readonly registryErrors: Counter<"call">;
  readonly routeReads: Counter<"reason">;
  readonly droppedReleases: Counter;
  readonly supersededClaims: Counter;
  readonly swept: Counter<"item">;
  readonly leaseHeld: Gauge;
  readonly liveInstances: Gauge;
  readonly pendingWrites: Gauge;
  readonly cachedTenants: Gauge;

  constructor(readonly server: ServerMetrics) {
    const registers = [server.registry];
    const collect = () => this.collect();
    this.registryRequests = new Counter({
      name: "kgw_fleet_registry_requests_total",
      help: "Requests sent to the fleet registry (DynamoDB), by operation, retries included.",
      labelNames: ["operation"] as const,
      registers,
    });
    this.registryErrors = new Counter({
      name: "kgw_fleet_registry_errors_total",
      help: "Registry calls that failed after their retries, by call (heartbeat, ownership, sweep, listInstances, ownersOf).",
      labelNames: ["call"] as const,
      registers,
    });
    this.routeReads = new Counter({
      name: "kgw_fleet_route_reads_total",
      help: "Reads of a tenant's owners for routing, by reason (miss, refresh, not_here); none per dial in the steady state.",
      labelNames: ["reason"] as const,
      registers,
    });
    this.droppedReleases = new Counter({
      name: "kgw_fleet_ownership_releases_dropped_total",
      help: "Ownership row deletions given up because too many were pending while the registry was unreachable (the resync after it deletes those rows).",
      registers,
    });
    this.supersededClaims = new Counter({
      name: "kgw_fleet_ownership_claims_superseded_total",
      help: "Ownership rows not claimed because a newer incarnation of this instance id holds them (two processes with one --server-id).",
      registers,
    });
    this.swept = new Counter({
      name: "kgw_fleet_swept_total",
      help: "What this instance's sweeper removed of dead instances, by item (instances: their leases, rows: their ownership rows).",
      labelNames: ["item"] as const,
      registers,
    });
    this.leaseHeld = new Gauge({
      name: "kgw_fleet_lease_held",
      help: "1 while this instance holds its lease in the registry (hosted readiness), else 0.",
      registers,
      collect,
    });
    this.liveInstances = new Gauge({
      name: "kgw_fleet_live_instances",
      help: "Instances alive and not draining, as this instance last read the leases.",
      registers,
      collect,
    });
    this.pendingWrites = new Gauge({
      name: "kgw_fleet_pending_ownership_writes",
      help: "Ownership rows waiting to be written or deleted (grows while the registry is unreachable).",
      registers,
      collect,
    });
    this.cachedTenants = new Gauge({
      name: "kgw_fleet_cached_tenants",
      help: "Tenants whose owners this instance remembers for routing.",
      registers,
      collect,
    });
  }

  /** Sets what refreshes the gauges before each read. */
  onCollect(collect: () => void): void {
    this.collect = collect;
  }
}
