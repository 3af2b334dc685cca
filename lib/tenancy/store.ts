/**
 * Where tenant records live. Two implementations share this contract and one test suite
 * (test/unit/tenant-store.contract.ts): the embedded file store (file-store/) and, in the fleet
 * issue, DynamoDB. The contract is shaped by what DynamoDB can do with single-item conditional
 * writes and no transactions:
 *
 * - A tenant is one item, keyed by its id. Its version is the optimistic-concurrency token.
 * - `put` is the only mutation: a whole-record write with the condition "the stored version is
 *   next.version - 1" (for version 1: "no record"). DynamoDB: PutItem with
 *   `attribute_not_exists(pk)` or `version = :expected`; ConditionalCheckFailedException becomes
 *   TenantVersionConflictError (ERR_CONFLICT). Deleting is a put too (a tombstone), so a
 *   deletion is a change watchers see, and a re-created id goes on counting versions.
 * - Reads return frozen snapshots. `get` is strongly consistent (it precedes writes);
 *   `list` may lag (DynamoDB's Scan is eventually consistent), which watchers tolerate by never
 *   going back to a lower version.
 * - Changes reach running servers through `watch` within its interval plus one read (documented
 *   bound: DEFAULT_WATCH_INTERVAL_MS in limits.ts).
 *
 * Read-modify-write with retries is `updateTenant` (mutate.ts); the rules of each change are
 * pure functions (operations.ts).
 */
import type { TenantStoreCorruptError } from "./errors.js";
import type { TenantRecord } from "./model.js";

export interface TenantListing {
  /** Every readable record, tombstones included, ordered by id. */
  readonly tenants: readonly TenantRecord[];
  /**
   * Records that exist but could not be read (corrupt, unreadable). One bad record does not hide
   * the others; the caller decides (the CLI reports them, a watcher keeps what it last knew).
   */
  readonly unreadable: readonly TenantStoreCorruptError[];
}

export interface TenantStore {
  /** The record of `id`, tombstone included, or undefined if none was ever written. */
  get(id: string): Promise<TenantRecord | undefined>;
  list(): Promise<TenantListing>;
  /**
   * Writes `next` if the stored version is `next.version - 1` (no record for version 1); throws
   * TenantVersionConflictError otherwise, InvalidTenantInputError for a record that breaks the
   * limits, and TenantStoreUnavailableError when the store cannot be reached.
   */
  put(next: TenantRecord): Promise<void>;
  /** Starts polling (or subscribing) for changes; see TenantWatch. */
  watch(options?: WatchOptions): TenantWatch;
  /** Releases what the store holds (handles, clients). Watches must be closed by their owners. */
  close(): Promise<void>;
}

export interface WatchOptions {
  /** Poll interval; defaults to DEFAULT_WATCH_INTERVAL_MS. */
  intervalMs?: number;
}

export interface TenantChanges {
  /** Records that are new or have a higher version than before (tombstones included). */
  readonly changed: readonly TenantRecord[];
  /** Ids whose record disappeared from the store altogether (removed by hand or purged). */
  readonly removed: readonly string[];
}

/**
 * A running server's view of the store: the latest snapshot of every tenant, kept fresh in the
 * background. Lookups are synchronous (no I/O on a handshake).
 */
export interface TenantWatch {
  /** Resolves after the first complete read; rejects if it failed (the server should not start). */
  readonly ready: Promise<void>;
  /** The latest known record of `id` (tombstones included), without I/O. */
  get(id: string): TenantRecord | undefined;
  /** Called after each poll that saw a change, with what changed. */
  on(event: "change", listener: (changes: TenantChanges) => void): this;
  /** A poll failed, or some record could not be read; the last known records stay in use. */
  on(event: "error", listener: (err: Error) => void): this;
  off(event: "change", listener: (changes: TenantChanges) => void): this;
  off(event: "error", listener: (err: Error) => void): this;
  close(): void;
}
