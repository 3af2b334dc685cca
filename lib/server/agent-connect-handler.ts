/**
 * Accepts one AgentService.Connect stream: validate metadata, authenticate, answer with serverID
 * and serverCount, then hand the stream to an AgentSession in the registry.
 */
import { Metadata, type ServerDuplexStream, status } from "@grpc/grpc-js";
import { GatewayError, grpcStatusFor, ProtocolError } from "../errors.js";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import { BEARER_PREFIX, Header, parseAgentIdentifiers } from "../proto/headers.js";
import type { Packet } from "../proto/packet.js";
import { CREDIT_FLOW_V1, FLOW_CONTROL_HEADER, negotiatedFlow } from "../tunnel/flow-control.js";
import type { AgentAuthenticator } from "./agent-auth.js";
import { AgentSession } from "./agent-session.js";
import type { BackendRegistry } from "./backend-registry.js";

/**
 * Agent IDs end up in logs, metrics and (later) registry keys, so they are restricted to what
 * upstream deployments use (UUIDs, pod and node names). No commas: HTTP/2 joins repeated headers
 * with ", ", and a joined pair of IDs must not pass as one.
 */
export const AGENT_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,252}$/;

export interface AgentConnectDeps {
  serverId: string;
  serverCount: number;
  dialTimeoutMs: number;
  authenticate: AgentAuthenticator;
  registry: BackendRegistry;
  /** False once shutdown has begun: new agents are turned away to reconnect elsewhere. */
  accepting: () => boolean;
  log: Logger;
  metrics: ServerMetrics;
}

function single(md: Metadata, key: string): string | undefined {
  const values = md.get(key);
  if (values.length !== 1) return undefined;
  const v = values[0];
  return typeof v === "string" ? v : undefined;
}

export function createAgentConnectHandler(deps: AgentConnectDeps) {
  return (call: ServerDuplexStream<Packet, Packet>): void => {
    const peer = call.getPeer();
    try {
      if (!deps.accepting()) throw new GatewayError("ERR_SHUTTING_DOWN", "server is shutting down");
      const agentId = single(call.metadata, Header.agentId);
      if (!agentId || !AGENT_ID_PATTERN.test(agentId)) {
        throw new ProtocolError(
          `metadata must carry exactly one ${Header.agentId} matching ${AGENT_ID_PATTERN}`,
        );
      }
      const auth = call.metadata.get(Header.authorization);
      if (auth.length > 1) throw new ProtocolError("more than one authorization header");
      const authValue = typeof auth[0] === "string" ? auth[0] : undefined;
      if (authValue !== undefined && !authValue.startsWith(BEARER_PREFIX)) {
        throw new ProtocolError("authorization must use the Bearer scheme");
      }
      const principal = deps.authenticate({
        verifiedCertificate: call.getAuthContext().sslPeerCertificate,
        bearerToken: authValue?.slice(BEARER_PREFIX.length),
      });
      const identifiers = parseAgentIdentifiers(single(call.metadata, Header.agentIdentifiers) ?? "");

      const headers = new Metadata();
      headers.set(Header.serverId, deps.serverId);
      headers.set(Header.serverCount, String(deps.serverCount));
      // Our agents offer per-connection flow control; upstream agents never do.
      const flow = negotiatedFlow(call.metadata.get(FLOW_CONTROL_HEADER));
      if (flow === "credit") headers.set(FLOW_CONTROL_HEADER, CREDIT_FLOW_V1);
      call.sendMetadata(headers);

      const log = deps.log.child({ agentId, tenant: principal.tenant, peer });
      const session = new AgentSession(
        call,
        { agentId, identifiers, tenant: principal.tenant, identity: principal.identity },
        { dialTimeoutMs: deps.dialTimeoutMs, flow, log, metrics: deps.metrics },
      );
      deps.metrics.grpcConnections.inc({ service_method: "Connect" });
      deps.metrics.readyBackends.inc();
      session.once("closed", () => {
        deps.metrics.grpcConnections.dec({ service_method: "Connect" });
        deps.metrics.readyBackends.dec();
        log.info("agent disconnected");
      });
      deps.registry.add(session);
      log.info({ identity: principal.identity, flow }, "agent connected");
    } catch (err) {
      const code = err instanceof GatewayError ? grpcStatusFor(err) : status.INTERNAL;
      const details = err instanceof GatewayError ? err.message : "internal error";
      deps.log.warn({ peer, code, err: details }, "agent stream refused");
      deps.metrics.rejectedConnections.inc({ listener: "agent", reason: status[code] ?? String(code) });
      call.emit("error", { code, details });
    }
  };
}
