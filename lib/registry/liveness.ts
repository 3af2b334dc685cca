/**
 * How readers decide who is alive, from what the registry returned and their own clock. Pure,
 * so routing, the sweeper and readiness agree and tests need no timers.
 */
import type { InstanceLease, OwnerRow } from "./model.js";

/** A lease counts while it has not expired and its instance is not draining. */
export function isLeaseLive(lease: InstanceLease, now: number): boolean {
  return !lease.draining && lease.expiresAt > now;
}

/**
 * The rows that point at a live instance: its lease is live, and the row was written by that
 * incarnation or a newer one (a row of an earlier incarnation belongs to a process that has
 * since restarted; a newer one belongs to a process whose fresher lease the caller has not read
 * yet, and its older lease is still live). Rows of instances without a lease count as gone.
 */
export function liveOwners(
  rows: readonly OwnerRow[],
  instances: ReadonlyMap<string, InstanceLease> | readonly InstanceLease[],
  now: number,
): OwnerRow[] {
  const byId =
    instances instanceof Map
      ? instances
      : new Map((instances as readonly InstanceLease[]).map((l) => [l.instanceId, l]));
  return rows.filter((row) => {
    const lease = byId.get(row.instanceId);
    return lease !== undefined && isLeaseLive(lease, now) && row.incarnation >= lease.incarnation;
  });
}

/**
 * Leases whose instance is dead for long enough that its rows may be removed: expired more than
 * `graceMs` ago (draining alone is not dead: its tunnels are still finishing).
 */
export function sweepable(leases: readonly InstanceLease[], now: number, graceMs: number): InstanceLease[] {
  return leases.filter((l) => l.expiresAt + graceMs <= now);
}
