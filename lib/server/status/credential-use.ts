/**
 * When each tenant credential last authenticated on this instance, for the status API ("is this
 * token still in use?" before revoking it). Written at authentication time, in memory: a map
 * entry per credential, never a store or registry write per handshake or dial. Only credentials
 * that authenticated are kept, so the entries are the store's credentials at most; a cap bounds
 * them anyway (the least recently used go first).
 */
import type { CredentialUse } from "./status-model.js";

/** Tenants whose credentials' uses are kept, and credentials per tenant: far beyond real ones. */
export const MAX_TRACKED_TENANTS = 10_000;
export const MAX_TRACKED_CREDENTIALS_PER_TENANT = 1_000;

interface Use {
  role: "agent" | "caller";
  at: number;
}

export class CredentialUseBook {
  /** Tenant → credential id → last use; insertion order is recency at both levels. */
  private readonly uses = new Map<string, Map<string, Use>>();

  constructor(private readonly now: () => number = Date.now) {}

  used(tenant: string, role: "agent" | "caller", ids: readonly string[]): void {
    const at = this.now();
    let mine = this.uses.get(tenant);
    if (mine) this.uses.delete(tenant);
    else mine = new Map();
    this.uses.set(tenant, mine);
    for (const id of ids) {
      mine.delete(id);
      mine.set(id, { role, at });
    }
    dropOldest(mine, MAX_TRACKED_CREDENTIALS_PER_TENANT);
    dropOldest(this.uses, MAX_TRACKED_TENANTS);
  }

  /** Tenants with a credential use kept. */
  tenantIds(): string[] {
    return [...this.uses.keys()];
  }

  /** The tenant's credentials, most recently used first. */
  of(tenant: string): CredentialUse[] {
    const mine = this.uses.get(tenant);
    if (!mine) return [];
    const out: CredentialUse[] = [];
    for (const [id, u] of mine) out.push({ id, role: u.role, lastUsed: new Date(u.at).toISOString() });
    return out.reverse();
  }
}

function dropOldest<K, V>(map: Map<K, V>, max: number): void {
  while (map.size > max) {
    const oldest = map.keys().next();
    if (oldest.done) return;
    map.delete(oldest.value);
  }
}
