/**
 * This instance's slice of the status model, read from memory when asked: its agent streams
 * (the registry), its tenants' recent dials (TenantActivity) and credentials' last use
 * (CredentialUseBook). What the admin port merges with its peers' slices, what a peer sends when
 * asked over the peer link, and what a tenant's self-status is cut from.
 */
import { KGW_VERSION } from "../../tenancy/manifest/images.js";
import type { AgentSession } from "../core/agent-session.js";
import type { CredentialUseBook } from "./credential-use.js";
import {
  type AgentStatus,
  type InstanceSlice,
  STATUS_API_VERSION,
  type TenantSlice,
} from "./status-model.js";
import type { TenantActivity } from "./tenant-activity.js";

/** What the slice is read from: the gateway's parts, passed in. */
export interface LocalStatusSource {
  readonly instance: string;
  readonly startedAt: number;
  /** False once shutdown began, or while the fleet has this instance draining. */
  draining(): boolean;
  agents(): Iterable<AgentSession>;
  agentsOf(tenant: string): readonly AgentSession[];
  openTunnels(): number;
  readonly activity: TenantActivity;
  readonly credentials: CredentialUseBook;
  now?: () => number;
}

const iso = (ms: number | undefined): string | null => (ms === undefined ? null : new Date(ms).toISOString());

export function agentStatus(session: AgentSession, instance: string): AgentStatus {
  const info = session.info;
  return {
    agentId: info.agentId,
    instance,
    remoteAddress: info.peer ?? null,
    transport: info.transport ?? null,
    agentVersion: info.version ?? null,
    connectedSince: iso(info.connectedAt),
    lastSeen: new Date(session.lastHeardAt).toISOString(),
    responsive: session.responsive,
    load: session.load,
  };
}

/** One tenant as this instance sees it. */
export function tenantSlice(src: LocalStatusSource, tenant: string): TenantSlice {
  return {
    tenant,
    agents: src.agentsOf(tenant).map((s) => agentStatus(s, src.instance)),
    openTunnels: src.activity.openTunnels(tenant),
    recent: src.activity.recent(tenant),
    lastError: src.activity.lastError(tenant),
    credentials: src.credentials.of(tenant),
  };
}

/** The whole slice, or (given `tenant`) only that tenant's part of it. */
export function localSlice(src: LocalStatusSource, tenant?: string): InstanceSlice {
  const now = (src.now ?? Date.now)();
  let agents = 0;
  const ids = new Set<string>();
  for (const s of src.agents()) {
    agents++;
    ids.add(s.info.tenant);
  }
  for (const id of src.activity.tenantIds()) ids.add(id);
  for (const id of src.credentials.tenantIds()) ids.add(id);
  const wanted = tenant === undefined ? [...ids].sort() : ids.has(tenant) ? [tenant] : [];
  return {
    apiVersion: STATUS_API_VERSION,
    instance: src.instance,
    version: KGW_VERSION,
    startedAt: new Date(src.startedAt).toISOString(),
    uptimeSeconds: Math.max(0, Math.floor((now - src.startedAt) / 1000)),
    draining: src.draining(),
    agents,
    tunnels: src.openTunnels(),
    tenants: wanted.map((id) => tenantSlice(src, id)),
  };
}
