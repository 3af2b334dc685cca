/**
 * The fleet registry's public surface, for the composition root (services/server) and routing.
 * docs/REGISTRY.md describes the table, the conditions and the costs.
 */

export * from "./durations.js";
export { createDynamoClient, type DynamoClientOptions } from "./dynamo/client.js";
export { DynamoRegistry, type DynamoRegistryOptions } from "./dynamo/dynamo-registry.js";
export * as registryTable from "./dynamo/table.js";
export {
  InvalidRegistryInputError,
  LeaseLostError,
  RegistryCorruptItemError,
  RegistryUnavailableError,
} from "./errors.js";
export {
  type ClaimOutcome,
  type FleetRegistry,
  type ReleaseOutcome,
  sweepOwnerRows,
} from "./fleet-registry.js";
export { LeaseKeeper, type LeaseKeeperOptions, type LeaseState, readyOnLease } from "./lease-keeper.js";
export { isLeaseLive, liveOwners, sweepable } from "./liveness.js";
export { MemoryRegistry, type MemoryRegistryOptions } from "./memory-registry.js";
export type { InstanceLease, LeaseWrite, Listing, OwnerFence, OwnerRow } from "./model.js";
export {
  OwnershipWriter,
  type OwnershipWriterOptions,
  type OwnershipWriterState,
} from "./ownership-writer.js";
export { Sweeper, type SweeperOptions, type SweepReport } from "./sweeper.js";
