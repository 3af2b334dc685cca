/**
 * Admits one agent stream, whatever transport carries it (gRPC AgentService.Connect or
 * kgw-tunnel/1): validate metadata, authenticate, compute the response headers, and, once the
 * transport has its packet stream, hand it to an AgentSession in the registry.
 *
 * Throws a GatewayError for a stream that must be refused; the transport maps it to its wire
 * (a gRPC status, or a REFUSED frame carrying the same code).
 */

import type { PeerCertificate } from "node:tls";
import { EGRESS_HEADER, EGRESS_V1 } from "../../egress/egress-wire.js";
import { GatewayError, ProtocolError, QuotaExceededError, ShuttingDownError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { type RefusalLog, refusalLog } from "../../observability/refusal-log.js";
import {
  AGENT_VERSION_HEADER,
  AGENT_VERSION_PATTERN,
  BEARER_PREFIX,
  Header,
  parseAgentIdentifiers,
} from "../../proto/headers.js";
import { DRAIN_HEADER, DRAIN_V1, negotiatedDrain } from "../../tunnel/drain-advice.js";
import { CREDIT_FLOW_V1, FLOW_CONTROL_HEADER, negotiatedFlow } from "../../tunnel/flow-control.js";
import type { PacketStream } from "../../tunnel/packet-stream.js";
import {
  negotiatedServerCount,
  SERVER_COUNT_HEADER,
  SERVER_COUNT_V1,
} from "../../tunnel/server-count-updates.js";
import type { LivenessTimes } from "../core/agent-liveness.js";
import { AgentSession } from "../core/agent-session.js";
import type { BackendRegistry } from "../core/backend-registry.js";
import type { CredentialHold } from "../core/dial-context.js";
import type { AgentAuthenticator } from "../policy/agent-auth.js";
import type { QuotaBook } from "../policy/tenant-quotas.js";

/**
 * Agent IDs end up in logs, metrics and (later) registry keys, so they are restricted to what
 * upstream deployments use (UUIDs, pod and node names). No commas: HTTP/2 joins repeated headers
 * with ", ", and a joined pair of IDs must not pass as one.
 */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,252}$/;

export interface AgentAdmissionDeps {
  serverId: string;
  /** serverCount for the agent connecting now: a flag's value, or the fleet's (lib/fleet/). */
  serverCount: () => number;
  dialTimeoutMs: number;
  liveness: LivenessTimes;
  authenticate: AgentAuthenticator;
  /** Tenants' quotas: an agent stream over its tenant's maxAgents is refused. */
  quotas: QuotaBook;
  /** Registers the session with the credential that admitted it, to close it on revocation. */
  hold: CredentialHold;
  registry: BackendRegistry;
  /** False once shutdown has begun: new agents are turned away to reconnect elsewhere. */
  accepting: () => boolean;
  log: Logger;
  metrics: ServerMetrics;
}

export interface AgentStreamRequest {
  /** "address:port", for logs. */
  peer: string;
  /** "grpc" or "tunnel", for logs, metrics and the status API. */
  transport: "grpc" | "tunnel";
  /** Every value of one request header (gRPC metadata may hold binary values; those never match). */
  metadata: (name: string) => readonly unknown[];
  /** Present only when the TLS handshake verified the client certificate chain. */
  verifiedCertificate: PeerCertificate | undefined;
  /** The agent may send per-connection credit whatever it offers (kgw-tunnel/1 requires it). */
  creditRequired?: boolean;
}

export interface AdmittedAgent {
  /** Response headers: serverID, serverCount and the negotiated extensions. */
  headers: Record<string, string[]>;
  /** Starts serving: call once the headers are on their way. */
  attach(stream: PacketStream): AgentSession;
}

function single(values: readonly unknown[]): string | undefined {
  return values.length === 1 && typeof values[0] === "string" ? values[0] : undefined;
}

export function admitAgent(deps: AgentAdmissionDeps, req: AgentStreamRequest): AdmittedAgent {
  if (!deps.accepting()) throw new ShuttingDownError();
  const agentId = single(req.metadata(Header.agentId));
  if (!agentId || !AGENT_ID_PATTERN.test(agentId)) {
    throw new ProtocolError(`metadata must carry exactly one ${Header.agentId} matching ${AGENT_ID_PATTERN}`);
  }
  const auth = req.metadata(Header.authorization);
  if (auth.length > 1) throw new ProtocolError("more than one authorization header");
  const authValue = typeof auth[0] === "string" ? auth[0] : undefined;
  if (authValue !== undefined && !authValue.startsWith(BEARER_PREFIX)) {
    throw new ProtocolError("authorization must use the Bearer scheme");
  }
  const principal = deps.authenticate({
    verifiedCertificate: req.verifiedCertificate,
    bearerToken: authValue?.slice(BEARER_PREFIX.length),
  });
  // Counted where it is held: agents of the tenant connected to this instance, this one aside.
  deps.quotas.admitAgent(principal.tenant, deps.registry.count(principal.tenant));
  const identifiers = parseAgentIdentifiers(single(req.metadata(Header.agentIdentifiers)) ?? "");
  // Shown in the status API only; a value that does not look like a version is not kept.
  const claimed = single(req.metadata(AGENT_VERSION_HEADER));
  const version = claimed !== undefined && AGENT_VERSION_PATTERN.test(claimed) ? claimed : null;

  // Our agents offer per-connection flow control; upstream agents never do.
  const flow = req.creditRequired ? "credit" : negotiatedFlow(req.metadata(FLOW_CONTROL_HEADER));
  const serverCount = deps.serverCount();
  const headers: Record<string, string[]> = {
    [Header.serverId]: [deps.serverId],
    [Header.serverCount]: [String(serverCount)],
  };
  if (flow === "credit") headers[FLOW_CONTROL_HEADER] = [CREDIT_FLOW_V1];
  // Our agents ask to be sent each dial's egress policy (judged again after name resolution).
  const egress = req.metadata(EGRESS_HEADER).includes(EGRESS_V1);
  if (egress) headers[EGRESS_HEADER] = [EGRESS_V1];
  // Our agents ask to be told when this server drains (lib/tunnel/drain-advice.ts).
  const drainAdvice = negotiatedDrain(req.metadata(DRAIN_HEADER));
  if (drainAdvice) headers[DRAIN_HEADER] = [DRAIN_V1];
  // Our agents ask to be told when serverCount changes (lib/tunnel/server-count-updates.ts).
  const serverCountUpdates = negotiatedServerCount(req.metadata(SERVER_COUNT_HEADER));
  if (serverCountUpdates) headers[SERVER_COUNT_HEADER] = [SERVER_COUNT_V1];

  return {
    headers,
    attach: (stream) => {
      const log = deps.log.child({ agentId, tenant: principal.tenant, peer: req.peer });
      const session = new AgentSession(
        stream,
        {
          agentId,
          identifiers,
          tenant: principal.tenant,
          identity: principal.identity,
          peer: req.peer,
          transport: req.transport,
          version,
          connectedAt: Date.now(),
        },
        {
          dialTimeoutMs: deps.dialTimeoutMs,
          flow,
          egress,
          drainAdvice,
          ...(serverCountUpdates ? { serverCountUpdates: { announced: serverCount } } : {}),
          liveness: deps.liveness,
          log,
          metrics: deps.metrics,
        },
      );
      session.on("responsive", (responsive) => {
        if (responsive) deps.metrics.unresponsiveAgents.dec();
        else deps.metrics.unresponsiveAgents.inc();
      });
      deps.metrics.grpcConnections.inc({ service_method: "Connect" });
      deps.metrics.readyBackends.inc();
      const release = deps.hold(principal.credential, (err) => session.close(err));
      session.once("closed", () => {
        release();
        deps.metrics.grpcConnections.dec({ service_method: "Connect" });
        deps.metrics.readyBackends.dec();
        if (!session.responsive) deps.metrics.unresponsiveAgents.dec();
        log.info("agent disconnected");
      });
      deps.registry.add(session);
      log.info({ identity: principal.identity, flow, transport: req.transport }, "agent connected");
      return session;
    },
  };
}

/**
 * The refusal log (budgeted, redacted: refusal-log.ts) of the listener `deps` serves: an agent
 * that has not authenticated may be refused as often as it asks.
 */
const refusalLogs = new WeakMap<AgentAdmissionDeps, RefusalLog>();
function refusalLogOf(deps: AgentAdmissionDeps): RefusalLog {
  const known = refusalLogs.get(deps);
  if (known) return known;
  const log = refusalLog(deps.log);
  refusalLogs.set(deps, log);
  return log;
}

/** Logs and counts a refused agent stream; returns the message safe to send back. */
export function recordRefusal(
  deps: AgentAdmissionDeps,
  peer: string,
  code: number,
  codeName: string,
  err: unknown,
): string {
  const details = err instanceof GatewayError ? err.message : "internal error";
  // A refused tenant credential says why (revoked, unknown, ...) for the operator; the agent
  // gets the one message for all. The tenant and credential are named where the store knows
  // them (claimedBy: a refused credential; a quota: an authenticated agent's tenant).
  const reason = (err as { reason?: unknown }).reason;
  const claimed = (err as { claimedBy?: { tenant: string; credential?: string } }).claimedBy;
  const tenant = err instanceof QuotaExceededError ? err.details.tenant : claimed?.tenant;
  refusalLogOf(deps)({ peer, err: details }, "agent stream refused", {
    code,
    ...(typeof reason === "string" ? { reason } : {}),
    ...(tenant !== undefined ? { tenant } : {}),
    ...(claimed?.credential !== undefined ? { credential: claimed.credential } : {}),
    ...(err instanceof QuotaExceededError ? { quota: err.quota, limit: err.details.limit } : {}),
  });
  deps.metrics.rejectedConnections.inc({ listener: "agent", reason: codeName });
  return details;
}
