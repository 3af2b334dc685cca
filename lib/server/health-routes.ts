/**
 * The server's probe routes: `/healthz` and `/readyz` on the health port (kubelet, the load
 * balancer), and `/readyz` with per-tenant readiness on the admin port.
 *
 * `/readyz?tenant=T` says whether tenant T has an agent connected and answering on this instance,
 * for an operator (or its controller) waiting for a new cluster's agent. It is served on the
 * admin port, not the health port: the health port listens on every interface and is what a load
 * balancer probes, so it may be reachable from wherever callers are; an answer that differs by
 * tenant would tell anyone there which tenants exist and when their clusters are connected. The
 * admin port is loopback (or a private network) by default and already names tenants in
 * /metrics. On the health port a tenant query gets 404 and where to ask, never the
 * instance-wide answer, which a probe would take for the tenant's.
 */
import { isValidTenantId } from "../tenancy/tenant-id.js";
import type { HttpReply, HttpRequestInfo, Routes } from "../transport/http-endpoints.js";
import { DEFAULT_TENANT } from "./policy/agent-auth.js";

/** What readiness is decided from: the gateway's state, read when a probe asks. */
export interface ReadinessState {
  /** False once shutdown began. */
  accepting(): boolean;
  /** Agents answering their probes, all tenants. */
  responsiveAgents(): number;
  /** The agents of `tenant` connected to this instance. */
  agentsOf(tenant: string): readonly { readonly responsive: boolean }[];
  /**
   * In a fleet, an instance is ready when it holds its lease, agents or not: a dial landing here
   * reaches the tenant's agents wherever they are (lib/fleet/).
   */
  fleet?: { ready(): boolean; state(): object };
}

const OK: HttpReply = { status: 200, body: "ok\n" };

function instanceReadiness(state: ReadinessState): HttpReply {
  if (!state.accepting()) return { status: 503, body: "shutting down\n" };
  if (state.fleet)
    return state.fleet.ready() ? OK : { status: 503, body: "not holding a lease in the fleet registry\n" };
  return state.responsiveAgents() > 0 ? OK : { status: 503, body: "no agent connected and answering\n" };
}

/** The admin port's `/readyz?verbose`: the answer, and the fleet's state behind it (JSON). */
function verboseReadiness(state: ReadinessState): HttpReply {
  const answer = instanceReadiness(state);
  const body = {
    ready: answer.status === 200,
    reason: answer.body.trim(),
    accepting: state.accepting(),
    agentsAnswering: state.responsiveAgents(),
    ...(state.fleet ? { fleet: state.fleet.state() } : {}),
  };
  return {
    status: answer.status,
    body: `${JSON.stringify(body, null, 2)}\n`,
    contentType: "application/json",
  };
}

/** A tenant id, or the drop-in's implicit "default" (reserved for stored tenants, valid here). */
const isTenantId = (id: string): boolean => isValidTenantId(id) || id === DEFAULT_TENANT;

const plural = (n: number, what: string): string => `${n} ${what}${n === 1 ? "" : "s"}`;

function tenantReadiness(state: ReadinessState, ids: string[]): HttpReply {
  const tenant = ids[0];
  // The id is echoed below only once it is known to be a DNS label: nothing to escape.
  if (ids.length !== 1 || tenant === undefined || !isTenantId(tenant)) {
    return { status: 400, body: "tenant must be given once, as a tenant id (a DNS label)\n" };
  }
  if (!state.accepting()) return { status: 503, body: `tenant ${tenant}: not ready: shutting down\n` };
  const agents = state.agentsOf(tenant);
  const answering = agents.filter((a) => a.responsive).length;
  if (answering > 0) {
    return {
      status: 200,
      body: `tenant ${tenant}: ready: ${plural(answering, "agent")} connected and answering\n`,
    };
  }
  return {
    status: 503,
    body:
      agents.length > 0
        ? `tenant ${tenant}: not ready: ${plural(agents.length, "agent")} connected, none answering\n`
        : `tenant ${tenant}: not ready: no agent connected to this instance\n`,
  };
}

/** The health port: liveness and the instance's readiness, unchanged by tenancy. */
export function healthRoutes(state: ReadinessState): Routes {
  return {
    "/healthz": () => OK,
    "/readyz": ({ query }: HttpRequestInfo) =>
      query.has("tenant")
        ? { status: 404, body: "per-tenant readiness is served on the admin port: /readyz?tenant=<id>\n" }
        : instanceReadiness(state),
  };
}

/** The admin port's /readyz: the instance's readiness, or with ?tenant=T that tenant's. */
export function adminReadinessRoutes(state: ReadinessState): Routes {
  return {
    "/readyz": ({ query }: HttpRequestInfo) =>
      query.has("tenant")
        ? tenantReadiness(state, query.getAll("tenant"))
        : query.has("verbose")
          ? verboseReadiness(state)
          : instanceReadiness(state),
  };
}
