/**
 * The fleet registry: which instances are alive (leases) and which instances hold a stream of
 * which tenant's agents (ownership rows). Two implementations share this contract and one test
 * suite (test/unit/registry.contract.ts): DynamoRegistry for a hosted fleet, and the tests'
 * MemoryRegistry (test/helpers/memory-registry.ts). A single-instance run has no registry.
 *
 * Every write is one item with a condition, no transactions, so DynamoDB-compatible local
 * servers behave as AWS does. The conditions are the fencing:
 *
 * - A lease is written by its instance only; a newer incarnation of the same id takes it over
 *   and the older one gets LeaseLostError from then on.
 * - A claim replaces a row only with a newer (incarnation, session); a release deletes a row
 *   only if it is still exactly the one released. A late write from an old stream or an old
 *   process therefore never removes or overwrites a newer owner.
 *
 * Liveness is the reader's decision (liveness.ts): rows of expired or draining instances count
 * as gone, whatever the table still holds; the sweeper and TTL only collect garbage.
 */
import type { InstanceLease, LeaseWrite, Listing, OwnerFence, OwnerRow } from "./model.js";

/** What a claim did: written, or refused because the table holds a newer session of the row. */
export type ClaimOutcome = "claimed" | "superseded";
/** What a release did: deleted the row, or nothing because the row is gone or newer (fenced). */
export type ReleaseOutcome = "released" | "fenced";

export interface FleetRegistry {
  /**
   * Writes the instance's lease. Throws LeaseLostError when a newer incarnation of the id holds
   * it, RegistryUnavailableError when the registry cannot be reached.
   */
  heartbeat(lease: LeaseWrite): Promise<void>;
  /**
   * Ends the lease at once (graceful stop): it is written as expired and draining, so readers
   * route elsewhere immediately and the sweeper collects the instance's rows. Does nothing if a
   * newer incarnation holds the lease.
   */
  releaseLease(instanceId: string, incarnation: number, now: number): Promise<void>;
  /**
   * Deletes a lease item if it is still exactly `lease` (same incarnation and heartbeat): the
   * sweeper's last step, after the instance's rows are gone. False if it changed meanwhile.
   */
  removeLease(lease: InstanceLease): Promise<boolean>;
  /** Every lease in the table, live or not; the caller decides with liveness.ts. */
  listInstances(): Promise<Listing<InstanceLease>>;

  /** Writes `row` unless the table holds the same row with a newer (incarnation, session). */
  claim(row: OwnerRow): Promise<ClaimOutcome>;
  /** Deletes the row if it is still `row`'s incarnation and session. */
  release(row: OwnerFence): Promise<ReleaseOutcome>;
  /** Every ownership row of `tenant` (all instances, live or not), strongly consistent. */
  ownersOf(tenant: string): Promise<Listing<OwnerRow>>;
  /**
   * Rows written by `instanceId` (any tenant), possibly a little stale (DynamoDB reads a global
   * secondary index). For the sweeper and for an instance reconciling its own rows.
   */
  rowsOfInstance(instanceId: string): Promise<Listing<OwnerRow>>;

  /** Releases what the registry holds (the SDK client's sockets). */
  close(): Promise<void>;
}

/**
 * Deletes the rows of `instanceId` written by an incarnation below `belowIncarnation`, each with
 * its own fence, and returns how many went. Used by the sweeper for a dead instance (below its
 * last incarnation + 1) and by a restarted instance for its predecessor's rows.
 */
export async function sweepOwnerRows(
  registry: FleetRegistry,
  instanceId: string,
  belowIncarnation: number,
): Promise<{ removed: number; unreadable: readonly Error[] }> {
  const { items, unreadable } = await registry.rowsOfInstance(instanceId);
  let removed = 0;
  for (const row of items) {
    if (row.incarnation >= belowIncarnation) continue;
    if ((await registry.release(row)) === "released") removed++;
  }
  return { removed, unreadable };
}
