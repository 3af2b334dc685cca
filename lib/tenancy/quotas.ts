/**
 * A tenant's quotas: how much of a gateway instance one tenant may hold, so that a tenant at its
 * limits (a dial storm, thousands of stalled tunnels, a crash-looping agent fleet) cannot take
 * what the others need. Each is enforced per instance by the server (lib/server/policy/
 * tenant-quotas.ts): over a limit, a dial gets 429 (CONNECT) or a DIAL_RSP error saying which
 * quota, an agent stream RESOURCE_EXHAUSTED.
 *
 * The record holds only the tenant's overrides; what is not set there is the server's default
 * (`--tenant-max-tunnels` and friends), so the operator can change every tenant's default in one
 * place and still give one tenant more.
 */
import { InvalidTenantInputError } from "./errors.js";

export interface TenantQuotas {
  /** Tunnels open at once (dials in flight and connections), per instance. */
  readonly maxTunnels?: number;
  /** Dials per second, sustained (a token bucket refilled at this rate)... */
  readonly dialsPerSecond?: number;
  /** ...and how many may come at once (the bucket's size). */
  readonly dialBurst?: number;
  /** Agent streams at once, per instance. */
  readonly maxAgents?: number;
  /**
   * MiB of the tenant's bytes in flight this instance may hold at once: the receive windows of
   * its tunnels, what their agent may send without asking (2 MiB each while idle, more once a
   * tunnel carries data and its window opens), so `maxBufferedMiB / 2` idle tunnels fit.
   */
  readonly maxBufferedMiB?: number;
}

export type QuotaName = keyof TenantQuotas;

/** The largest cluster Kubernetes supports (nodes); a DaemonSet runs one agent on each. */
export const LARGEST_CLUSTER_NODES = 5_000;

/**
 * Agent streams one tenant may hold on one instance unless its record says otherwise: twice the
 * largest supported cluster's DaemonSet. Every agent may hold a stream to the same instance (one
 * instance, or a fleet no larger than --agent-redundancy), and for a while a node's old stream
 * and its successor's both count (a node pool replaced faster than liveness ends dead streams, a
 * make-before-break reconnect), so no real cluster reaches it. What it stops is what no cluster
 * does: a leaked agent token in a scaled-out Deployment, or agents reconnecting in a loop, taking
 * an instance's memory (about 40-75 KiB per idle stream, docs/PERFORMANCE.md) from the others.
 */
export const DEFAULT_MAX_AGENTS = 2 * LARGEST_CLUSTER_NODES;

/** Bounds an operator may set: above them a "quota" is no protection, below them no service. */
export const QUOTA_BOUNDS: Readonly<Record<QuotaName, readonly [min: number, max: number]>> = {
  maxTunnels: [1, 1_000_000],
  dialsPerSecond: [1, 100_000],
  dialBurst: [1, 1_000_000],
  // Twice the default: room for a tenant given more, still a bound on one instance's streams.
  maxAgents: [1, 2 * DEFAULT_MAX_AGENTS],
  maxBufferedMiB: [4, 1_048_576],
};

export const QUOTA_NAMES = Object.keys(QUOTA_BOUNDS) as QuotaName[];

/** Checks overrides as stored or given; throws InvalidTenantInputError naming the quota. */
export function validateQuotas(q: unknown): TenantQuotas {
  if (typeof q !== "object" || q === null || Array.isArray(q))
    throw new InvalidTenantInputError("quotas must be an object");
  const out: Record<string, number> = {};
  for (const [key, value] of Object.entries(q)) {
    if (!Object.hasOwn(QUOTA_BOUNDS, key))
      throw new InvalidTenantInputError(`unknown quota ${JSON.stringify(key.slice(0, 40))}`);
    const [min, max] = QUOTA_BOUNDS[key as QuotaName];
    if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max)
      throw new InvalidTenantInputError(`quota ${key} must be an integer from ${min} to ${max}`);
    out[key] = value as number;
  }
  return out;
}

/** The quotas in force: the tenant's overrides over the server's defaults. */
export function effectiveQuotas(
  overrides: TenantQuotas,
  defaults: Required<TenantQuotas>,
): Required<TenantQuotas> {
  return { ...defaults, ...overrides };
}
