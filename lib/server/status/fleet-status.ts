/**
 * The fleet's status from the slices its instances sent (or did not): pure, so what the admin
 * port answers is tested without a fleet. Every instance the registry names is listed, answered
 * or not, with the reason it did not: a dead peer shows as such, never as a fleet that is
 * smaller than it is. A tenant's numbers are the sums over the instances that answered; the
 * answer says `partial` when some did not.
 */
import type { DialOutcome } from "../audit/audit-record.js";
import {
  type AgentStatus,
  type CredentialUse,
  type FleetStatus,
  type InstanceSlice,
  type InstanceStatus,
  type LastError,
  type LeaseState,
  type RecentActivity,
  STATUS_API_VERSION,
  type TenantDetail,
  type TenantSlice,
  type TenantStatus,
  type TenantSummary,
} from "./status-model.js";

/** One instance as the answering instance found it: its lease, and its slice or why none. */
export interface InstanceAnswer {
  readonly id: string;
  readonly peerAddress: string | null;
  readonly lease: LeaseState;
  readonly leaseExpiresAt: number | null;
  readonly slice: InstanceSlice | null;
  /** Why there is no slice ("timeout", "unreachable", "lease expired", ...); null with one. */
  readonly reason: string | null;
}

function instanceStatus(a: InstanceAnswer): InstanceStatus {
  const s = a.slice;
  return {
    id: a.id,
    peerAddress: a.peerAddress,
    lease: a.lease,
    leaseExpiresAt: a.leaseExpiresAt === null ? null : new Date(a.leaseExpiresAt).toISOString(),
    answered: s !== null,
    reason: s === null ? (a.reason ?? "no answer") : null,
    draining: s?.draining ?? null,
    agents: s?.agents ?? null,
    tunnels: s?.tunnels ?? null,
    version: s?.version ?? null,
    startedAt: s?.startedAt ?? null,
    uptimeSeconds: s?.uptimeSeconds ?? null,
  };
}

function mergeRecent(parts: readonly RecentActivity[]): RecentActivity {
  const dials: Partial<Record<DialOutcome, number>> = {};
  const failures: Record<string, number> = {};
  let windowMinutes = 0;
  for (const p of parts) {
    windowMinutes = Math.max(windowMinutes, p.windowMinutes);
    for (const [k, n] of Object.entries(p.dials) as [DialOutcome, number][]) dials[k] = (dials[k] ?? 0) + n;
    for (const [k, n] of Object.entries(p.failures)) failures[k] = (failures[k] ?? 0) + n;
  }
  return { windowMinutes, dials, failures };
}

function latestError(parts: readonly (LastError | null)[]): LastError | null {
  let last: LastError | null = null;
  for (const e of parts) if (e && (!last || e.at > last.at)) last = e;
  return last;
}

function mergeCredentials(parts: readonly (readonly CredentialUse[])[]): CredentialUse[] {
  const byId = new Map<string, CredentialUse>();
  for (const list of parts)
    for (const c of list) {
      const known = byId.get(c.id);
      if (!known || c.lastUsed > known.lastUsed) byId.set(c.id, c);
    }
  return [...byId.values()].sort((a, b) => (a.lastUsed < b.lastUsed ? 1 : a.lastUsed > b.lastUsed ? -1 : 0));
}

/** Every tenant's slices, by tenant, over the instances that answered. */
function slicesByTenant(answers: readonly InstanceAnswer[]): Map<string, TenantSlice[]> {
  const out = new Map<string, TenantSlice[]>();
  for (const a of answers)
    for (const t of a.slice?.tenants ?? []) {
      const list = out.get(t.tenant);
      if (list) list.push(t);
      else out.set(t.tenant, [t]);
    }
  return out;
}

function byAgent(a: AgentStatus, b: AgentStatus): number {
  return a.agentId < b.agentId ? -1 : a.agentId > b.agentId ? 1 : a.instance < b.instance ? -1 : 1;
}

export function tenantDetail(tenant: string, slices: readonly TenantSlice[]): TenantDetail {
  return {
    tenant,
    agents: slices.flatMap((s) => s.agents).sort(byAgent),
    openTunnels: slices.reduce((n, s) => n + s.openTunnels, 0),
    recent: mergeRecent(slices.map((s) => s.recent)),
    lastError: latestError(slices.map((s) => s.lastError)),
    credentials: mergeCredentials(slices.map((s) => s.credentials)),
  };
}

function summary(detail: TenantDetail): TenantSummary {
  return {
    tenant: detail.tenant,
    agents: detail.agents.length,
    instances: [...new Set(detail.agents.map((a) => a.instance))].sort(),
    openTunnels: detail.openTunnels,
    recent: detail.recent,
    lastError: detail.lastError,
  };
}

const byId = (a: InstanceAnswer, b: InstanceAnswer) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export function fleetStatus(
  answeredBy: string,
  answers: readonly InstanceAnswer[],
  now: number,
): FleetStatus {
  const sorted = [...answers].sort(byId);
  const tenants = [...slicesByTenant(sorted)]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([id, slices]) => summary(tenantDetail(id, slices)));
  return {
    apiVersion: STATUS_API_VERSION,
    generatedAt: new Date(now).toISOString(),
    answeredBy,
    partial: sorted.some((a) => a.slice === null),
    instances: sorted.map(instanceStatus),
    tenants,
  };
}

export function tenantStatus(
  answeredBy: string,
  answers: readonly InstanceAnswer[],
  tenant: string,
  now: number,
): TenantStatus {
  const sorted = [...answers].sort(byId);
  return {
    apiVersion: STATUS_API_VERSION,
    generatedAt: new Date(now).toISOString(),
    answeredBy,
    partial: sorted.some((a) => a.slice === null),
    instances: sorted.map(instanceStatus),
    tenant: tenantDetail(tenant, slicesByTenant(sorted).get(tenant) ?? []),
  };
}
