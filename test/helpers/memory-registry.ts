/**
 * A FleetRegistry in a Map, for tests: the same items and the same conditions as DynamoDB
 * (lib/registry/dynamo/dynamo-registry.ts), pinned by the same contract suite
 * (test/unit/registry.contract.ts), on something that cannot be slow or down unless a test makes
 * it so. A single-instance run has no registry at all; only a fleet (--registry-table) does.
 *
 * Like DynamoDB's TTL, expired items are garbage: with a clock, an item whose TTL has passed is
 * dropped when next touched, so a long local run does not grow.
 */

import { LEASE_ITEM_TTL_MS, OWNER_ROW_TTL_MS } from "../../lib/registry/durations.js";
import { LeaseLostError } from "../../lib/registry/errors.js";
import type { ClaimOutcome, FleetRegistry, ReleaseOutcome } from "../../lib/registry/fleet-registry.js";
import { checkInstanceId, checkLease, checkRow, checkTenant } from "../../lib/registry/keys.js";
import type { InstanceLease, LeaseWrite, Listing, OwnerFence, OwnerRow } from "../../lib/registry/model.js";

interface Stored<T> {
  value: T;
  /** ms; the item is garbage after it. */
  ttl: number;
}

export interface MemoryRegistryOptions {
  /** ms since the epoch; Date.now by default. */
  clock?: () => number;
}

export class MemoryRegistry implements FleetRegistry {
  private readonly leases = new Map<string, Stored<InstanceLease>>();
  /** tenant → "instanceId\0agentId" → row. */
  private readonly owners = new Map<string, Map<string, Stored<OwnerRow>>>();
  private readonly clock: () => number;

  constructor(options: MemoryRegistryOptions = {}) {
    this.clock = options.clock ?? Date.now;
  }

  async heartbeat(lease: LeaseWrite): Promise<void> {
    checkLease(lease);
    const current = this.lease(lease.instanceId);
    // attribute_not_exists(pk) OR incarnation <= :inc
    if (current && current.incarnation > lease.incarnation) {
      throw new LeaseLostError(lease.instanceId, lease.incarnation);
    }
    this.leases.set(lease.instanceId, {
      value: Object.freeze({ ...lease }),
      ttl: lease.heartbeatAt + LEASE_ITEM_TTL_MS,
    });
  }

  async releaseLease(instanceId: string, incarnation: number, now: number): Promise<void> {
    const current = this.lease(checkInstanceId(instanceId));
    // incarnation = :inc
    if (!current || current.incarnation !== incarnation) return;
    this.leases.set(instanceId, {
      value: Object.freeze({ ...current, expiresAt: now, draining: true }),
      ttl: now + LEASE_ITEM_TTL_MS,
    });
  }

  async removeLease(lease: InstanceLease): Promise<boolean> {
    const current = this.lease(checkInstanceId(lease.instanceId));
    // incarnation = :inc AND heartbeatAt = :hb AND expiresAt = :exp
    if (
      !current ||
      current.incarnation !== lease.incarnation ||
      current.heartbeatAt !== lease.heartbeatAt ||
      current.expiresAt !== lease.expiresAt
    ) {
      return false;
    }
    this.leases.delete(lease.instanceId);
    return true;
  }

  async listInstances(): Promise<Listing<InstanceLease>> {
    const items: InstanceLease[] = [];
    for (const id of [...this.leases.keys()].sort()) {
      const lease = this.lease(id);
      if (lease) items.push(lease);
    }
    return { items, unreadable: [] };
  }

  async claim(row: OwnerRow): Promise<ClaimOutcome> {
    checkRow(row);
    const rows = this.rowsFor(row.tenant);
    const key = rowKey(row);
    const current = this.live(rows, key);
    // attribute_not_exists(pk) OR incarnation < :inc OR (incarnation = :inc AND session <= :session)
    if (
      current &&
      !(
        current.incarnation < row.incarnation ||
        (current.incarnation === row.incarnation && current.session <= row.session)
      )
    ) {
      return "superseded";
    }
    rows.set(key, { value: Object.freeze({ ...row }), ttl: this.clock() + OWNER_ROW_TTL_MS });
    return "claimed";
  }

  async release(row: OwnerFence): Promise<ReleaseOutcome> {
    checkTenant(row.tenant);
    const rows = this.rowsOf(row.tenant);
    const key = rowKey(row);
    const current = rows && this.live(rows, key);
    // incarnation = :inc AND session = :session
    if (!rows || !current || current.incarnation !== row.incarnation || current.session !== row.session) {
      return "fenced";
    }
    rows.delete(key);
    if (rows.size === 0) this.owners.delete(row.tenant);
    return "released";
  }

  async ownersOf(tenant: string): Promise<Listing<OwnerRow>> {
    const rows = this.rowsOf(checkTenant(tenant));
    const items: OwnerRow[] = [];
    for (const key of [...(rows?.keys() ?? [])].sort()) {
      const row = this.live(rows!, key);
      if (row) items.push(row);
    }
    return { items, unreadable: [] };
  }

  async rowsOfInstance(instanceId: string): Promise<Listing<OwnerRow>> {
    checkInstanceId(instanceId);
    const items: OwnerRow[] = [];
    for (const tenant of [...this.owners.keys()].sort()) {
      items.push(...(await this.ownersOf(tenant)).items.filter((r) => r.instanceId === instanceId));
    }
    return { items, unreadable: [] };
  }

  async close(): Promise<void> {}

  private lease(id: string): InstanceLease | undefined {
    const stored = this.leases.get(id);
    if (stored && stored.ttl <= this.clock()) {
      this.leases.delete(id);
      return undefined;
    }
    return stored?.value;
  }

  private rowsOf(tenant: string): Map<string, Stored<OwnerRow>> | undefined {
    return this.owners.get(tenant);
  }

  private rowsFor(tenant: string): Map<string, Stored<OwnerRow>> {
    let rows = this.owners.get(tenant);
    if (!rows) {
      rows = new Map();
      this.owners.set(tenant, rows);
    }
    return rows;
  }

  private live(rows: Map<string, Stored<OwnerRow>>, key: string): OwnerRow | undefined {
    const stored = rows.get(key);
    if (stored && stored.ttl <= this.clock()) {
      rows.delete(key);
      return undefined;
    }
    return stored?.value;
  }
}

/** Instance ids have no NUL (keys.ts), so this joins unambiguously. */
const rowKey = (r: Pick<OwnerRow, "instanceId" | "agentId">) => `${r.instanceId}\0${r.agentId}`;
