/**
 * The one status model (docs/OPERATIONS.md has every field): what an instance knows of itself
 * (InstanceSlice, built from memory by local-status.ts), and what the admin port's JSON answers
 * for the whole fleet (FleetStatus, TenantDetail: fleet-status.ts merges the slices). The same
 * shapes feed `kgw status`, and a tenant's own slice of them answers it on the gateway port
 * (self-status-route.ts). Types only: nothing here touches a socket or a clock.
 *
 * Times are ISO 8601 strings (UTC). Counts are over this instance's memory since it started,
 * except `recent`, which covers the last `windowMinutes`.
 */
import type { DialOutcome } from "../audit/audit-record.js";

/** The version of the JSON: a field is only ever added under the same version. */
export const STATUS_API_VERSION = "kgw.status/v1";

/** One agent stream, where it really is. */
export interface AgentStatus {
  readonly agentId: string;
  /** The instance holding the stream (--server-id). */
  readonly instance: string;
  /** Where the stream comes from ("address:port", as this instance sees it). */
  readonly remoteAddress: string | null;
  /** "grpc" (AgentService.Connect) or "tunnel" (kgw-tunnel/1). */
  readonly transport: "grpc" | "tunnel" | null;
  /** What the agent said it runs; null when it did not say (upstream's proxy-agent). */
  readonly agentVersion: string | null;
  readonly connectedSince: string | null;
  /** When anything (a packet, a probe's answer) was last heard from the agent. */
  readonly lastSeen: string;
  /** False while it does not answer its probes (no new dials go to it). */
  readonly responsive: boolean;
  /** Dials pending and tunnels open on this stream. */
  readonly load: number;
}

/** The last dial of a tenant that did not end well. */
export interface LastError {
  readonly at: string;
  /** ERR_* (lib/error-codes.ts), or null for an error that is not one of ours. */
  readonly code: string | null;
  readonly outcome: DialOutcome;
  /** The dial's id: its audit record's `dialId`. */
  readonly dialId: string;
  readonly instance: string;
}

/** What a tenant's dials did over the last minutes. */
export interface RecentActivity {
  readonly windowMinutes: number;
  /** Dials that ended, by outcome (audit-record.ts's outcomes). */
  readonly dials: Readonly<Partial<Record<DialOutcome, number>>>;
  /** Dials that did not end well, by reason: the error code (ERR_*), or "unknown". */
  readonly failures: Readonly<Record<string, number>>;
}

/** A credential that authenticated here: the id only ("token:<id>", "cert:<serial>"). */
export interface CredentialUse {
  readonly id: string;
  readonly role: "agent" | "caller";
  readonly lastUsed: string;
}

/** One tenant as one instance sees it. */
export interface TenantSlice {
  readonly tenant: string;
  readonly agents: readonly AgentStatus[];
  /** Tunnels of this tenant open through this instance (counted where the caller's dial came in). */
  readonly openTunnels: number;
  readonly recent: RecentActivity;
  readonly lastError: LastError | null;
  readonly credentials: readonly CredentialUse[];
}

/** What one instance answers about itself: the peer method's message and the local part. */
export interface InstanceSlice {
  readonly apiVersion: typeof STATUS_API_VERSION;
  readonly instance: string;
  readonly version: string;
  readonly startedAt: string;
  readonly uptimeSeconds: number;
  readonly draining: boolean;
  /** Agent streams and open tunnels here, all tenants. */
  readonly agents: number;
  readonly tunnels: number;
  readonly tenants: readonly TenantSlice[];
}

/**
 * The lease as the registry holds it, judged by the instance that answers: live; draining (its
 * tunnels finish, no new work); expired (not renewed: dead or cut off); gone (the sweeper removed
 * it: the instance died a while ago); none (no fleet: the instance alone).
 */
export type LeaseState = "live" | "draining" | "expired" | "gone" | "none";

/** One instance of the fleet, whether it answered or not. */
export interface InstanceStatus {
  readonly id: string;
  readonly peerAddress: string | null;
  readonly lease: LeaseState;
  readonly leaseExpiresAt: string | null;
  /** Whether its live state is in this answer; when false, `reason` says why not. */
  readonly answered: boolean;
  readonly reason: string | null;
  readonly draining: boolean | null;
  readonly agents: number | null;
  readonly tunnels: number | null;
  readonly version: string | null;
  readonly startedAt: string | null;
  readonly uptimeSeconds: number | null;
}

/** One tenant across the fleet, in brief. */
export interface TenantSummary {
  readonly tenant: string;
  readonly agents: number;
  /** Instances holding its agents' streams, sorted. */
  readonly instances: readonly string[];
  readonly openTunnels: number;
  readonly recent: RecentActivity;
  readonly lastError: LastError | null;
}

/** `GET /status`: the fleet and its tenants. */
export interface FleetStatus {
  readonly apiVersion: typeof STATUS_API_VERSION;
  readonly generatedAt: string;
  /** The instance that answered (and asked its peers). */
  readonly answeredBy: string;
  /** True when some instance did not answer: its agents and counts are missing. */
  readonly partial: boolean;
  readonly instances: readonly InstanceStatus[];
  readonly tenants: readonly TenantSummary[];
}

/** One tenant in detail, merged over the instances that answered. */
export interface TenantDetail {
  readonly tenant: string;
  readonly agents: readonly AgentStatus[];
  readonly openTunnels: number;
  readonly recent: RecentActivity;
  readonly lastError: LastError | null;
  /** Each credential once, with its latest use on any instance that answered. */
  readonly credentials: readonly CredentialUse[];
}

/** `GET /status/tenants/<id>`. */
export interface TenantStatus {
  readonly apiVersion: typeof STATUS_API_VERSION;
  readonly generatedAt: string;
  readonly answeredBy: string;
  readonly partial: boolean;
  readonly instances: readonly InstanceStatus[];
  readonly tenant: TenantDetail;
}
