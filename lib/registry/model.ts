/**
 * What the fleet registry holds: one lease per gateway instance and one ownership row per
 * (tenant, agent, instance). Both implementations (dynamo/, and the tests'
 * test/helpers/memory-registry.ts) store exactly these shapes; docs/REGISTRY.md has the
 * DynamoDB items.
 *
 * Times are milliseconds since the epoch, written by the instance that owns the item from its
 * own clock. Readers compare them with theirs (liveness.ts), so clock skew between instances
 * shortens or lengthens a lease by the skew; NTP keeps that to milliseconds.
 */

/** One gateway instance's claim to be alive, renewed by its LeaseKeeper. */
export interface InstanceLease {
  readonly instanceId: string;
  /** host:port other instances dial for peer links. */
  readonly peerAddress: string;
  /**
   * When this process started (ms). A restarted process with the same id has a higher one and
   * takes the lease over; the older process's writes are refused from then on (fencing).
   */
  readonly incarnation: number;
  readonly heartbeatAt: number;
  /** The lease is void from this instant on, whatever the item still says. */
  readonly expiresAt: number;
  /** Accepts no new agents or dials: readers route elsewhere while its tunnels finish. */
  readonly draining: boolean;
  /** Agents connected at the last heartbeat, for operators; nothing decides on it. */
  readonly agents: number;
}

/** What a heartbeat writes (the registry adds nothing: the keeper owns every field). */
export type LeaseWrite = InstanceLease;

/**
 * "Agent `agentId` of `tenant` holds a stream to instance `instanceId`". An agent with
 * serverCount > 1 holds streams to several instances, so it has one row per instance; rows of
 * one agent on different instances never touch each other.
 */
export interface OwnerRow {
  readonly tenant: string;
  readonly agentId: string;
  readonly instanceId: string;
  /** The incarnation of the instance that wrote the row. */
  readonly incarnation: number;
  /**
   * Which of the agent's streams to this incarnation the row describes: a counter the writer
   * increases per connect, so a reconnect's row replaces the one before and a late release of
   * the earlier stream finds a different session and deletes nothing.
   */
  readonly session: number;
  readonly connectedAt: number;
}

/** The fields that identify one row and fence writes to it. */
export type OwnerFence = Pick<OwnerRow, "tenant" | "agentId" | "instanceId" | "incarnation" | "session">;

/**
 * A read of several items. One malformed item (hand-edited, written by a newer version) does
 * not hide the others: it is skipped and reported in `unreadable`.
 */
export interface Listing<T> {
  readonly items: readonly T[];
  readonly unreadable: readonly Error[];
}
