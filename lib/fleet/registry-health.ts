/**
 * Whether routing should wait on the registry: not while the leases' reads fail or hang
 * (InstanceView.readsFailing), nor for ROUTE_REGISTRY_DOWN_MS after a routing read failed or timed
 * out. A hung registry (connections accepted, nothing answered) shows in the leases' reads only
 * after two intervals; meanwhile a dial has the peers asked beside its read after
 * ROUTE_PROBE_AFTER_MS, and once that read times out the dials after it ask the peers at once
 * (owner-lookup.ts, peer-probe.ts).
 */
import { ROUTE_REGISTRY_DOWN_MS } from "../server/durations.js";

export interface RegistryHealthOptions {
  /** True while the leases' reads fail or hang. */
  leaseReadsFailing: () => boolean;
  clock?: () => number;
  downMs?: number;
}

export class RegistryHealth {
  private failedAt = Number.NEGATIVE_INFINITY;
  private readonly clock: () => number;

  constructor(private readonly opts: RegistryHealthOptions) {
    this.clock = opts.clock ?? Date.now;
  }

  /** A routing read failed or did not answer in time. */
  readFailed(): void {
    this.failedAt = this.clock();
  }

  down(): boolean {
    if (this.opts.leaseReadsFailing()) return true;
    return this.clock() - this.failedAt < (this.opts.downMs ?? ROUTE_REGISTRY_DOWN_MS);
  }
}
