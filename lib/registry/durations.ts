/**
 * Every duration and bound of the fleet registry, each with its reason. Costs that follow from
 * them are worked out in docs/REGISTRY.md. The lease flags' defaults (lib/config/fleet-options.ts)
 * refer to these; routing's and the peer links' durations are the server's
 * (lib/server/durations.ts).
 */

/**
 * How often an instance renews its lease. One write per instance per interval whatever the
 * number of agents; 3 s keeps the write rate of a 10-instance fleet at about 3 per second.
 */
export const DEFAULT_HEARTBEAT_MS = 3_000;

/**
 * How long a lease lasts from its heartbeat: over three heartbeats, so one or two lost writes
 * (a throttle, a slow request) never let a live instance look dead. It bounds how long readers
 * may keep routing to a killed instance whose peer link has not failed yet.
 */
export const DEFAULT_LEASE_MS = 10_000;

/** The smallest lease accepted, in heartbeats (the rule). */
export const MIN_HEARTBEATS_PER_LEASE = 3;

/**
 * Each heartbeat interval is drawn uniformly from [1 - jitter, 1] × the interval, so instances
 * started together spread their writes and no interval is ever longer than configured.
 */
export const HEARTBEAT_JITTER = 0.2;

/**
 * The keeper believes it holds its lease until this long before the expiry it wrote. Readers on
 * other hosts compare that expiry with their clocks; the margin covers their skew, so an
 * instance never thinks itself ready while others already count it dead.
 */
export const LEASE_SAFETY_MARGIN_MS = 1_000;

/** First retry after a failed heartbeat; doubled per failure with full jitter, capped below. */
export const HEARTBEAT_RETRY_BASE_MS = 200;

/**
 * How long after its lease expired an instance's rows are left before the sweeper deletes them.
 * Readers ignore them from the expiry on; the grace only spares a paused instance (a long GC, a
 * partition) from losing rows it will re-claim anyway when it comes back.
 */
export const DEFAULT_SWEEP_GRACE_MS = 30_000;

/**
 * TTL of ownership rows: garbage collection only (DynamoDB deletes expired items within days,
 * never on time). Long, so a connected agent's row never expires; the owner re-stamps a row
 * older than OWNER_ROW_RESTAMP_MS, so a live row always has six days or more left.
 */
export const OWNER_ROW_TTL_MS = 7 * 86_400_000;
export const OWNER_ROW_RESTAMP_MS = 86_400_000;
/** How often the writer looks for rows due for a re-stamp: a walk over its own rows. */
export const RESTAMP_CHECK_MS = 3_600_000;

/** TTL of lease items: the sweeper deletes dead instances' leases; TTL is the backstop. */
export const LEASE_ITEM_TTL_MS = 86_400_000;

/**
 * Ownership writes in flight at once per instance. Enough to re-claim thousands of rows within
 * seconds after an outage (a write takes a few ms), few enough not to throttle the table.
 */
export const OWNER_WRITE_CONCURRENCY = 8;

/**
 * Rows whose deletion is still to be written, at most. Pending claims are bounded by the agents
 * connected (one per agent stream); deletions pile up only while the registry is down, one per
 * agent that left. Past this bound the oldest are dropped and counted: readers already ignore
 * them once the peer answers "no longer here", and the next reconciliation (after the outage)
 * deletes every row of ours that is not connected.
 */
export const MAX_PENDING_RELEASES = 10_000;

/** Backoff of ownership writes while the registry fails: full jitter from 100 ms up to 5 s. */
export const OWNER_RETRY_BASE_MS = 100;
export const OWNER_RETRY_CAP_MS = 5_000;

/**
 * Timeouts of each DynamoDB request. A request to DynamoDB takes milliseconds; an endpoint that
 * does not answer in these is down, and waiting longer only delays the retry.
 * With the SDK's 4 attempts, an unreachable table fails within about 4 × 2 s + backoff.
 */
export const DYNAMO_CONNECT_TIMEOUT_MS = 1_000;
export const DYNAMO_REQUEST_TIMEOUT_MS = 2_000;
/** The SDK's default for DynamoDB (throttling and transient errors, full-jitter backoff). */
export const DYNAMO_MAX_ATTEMPTS = 4;
