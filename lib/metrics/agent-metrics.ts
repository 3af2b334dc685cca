import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { PacketCounter } from "./tallied-counter.js";

/**
 * Agent metrics under upstream proxy-agent's names (`konnectivity_network_proxy_agent_*`) and
 * label values, so existing dashboards keep working. One registry per agent: tests run several
 * agents in one process.
 */
const NS = "konnectivity_network_proxy_agent";

/** Upstream's endpoint dial failure reasons. */
export type EndpointDialFailureReason = "timeout" | "unknown";

/**
 * Upstream labels stream packets from the tunnel's point of view: what the agent sends travels
 * `from_agent`, what it receives travels `to_agent`.
 */
export type AgentStreamSegment = "from_agent" | "to_agent";

/** Deprecated upstream counter's directions: failures sending to / receiving from the server. */
export type ServerFailureDirection = "to_server" | "from_server";

export class AgentMetrics {
  readonly registry = new Registry();

  readonly dialDuration = new Histogram({
    name: `${NS}_dial_duration_seconds`,
    help: "Latency of dial to the remote endpoint in seconds",
    // Upstream's buckets: 5ms to 30s.
    buckets: [0.005, 0.025, 0.1, 0.5, 2.5, 10, 30],
    registers: [this.registry],
  });

  readonly endpointDialFailures = new Counter({
    name: `${NS}_endpoint_dial_failure_total`,
    help: "Number of failures dialing the remote endpoint, by reason (example: timeout).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });

  readonly serverFailures = new Counter({
    name: `${NS}_server_connection_failure_count`,
    help: "Count of failures to send to or receive from the proxy server, labeled by the direction (from_server or to_server). DEPRECATED, please use stream_errors_total",
    labelNames: ["direction"] as const,
    registers: [this.registry],
  });

  readonly openServerConnections = new Gauge({
    name: `${NS}_open_server_connections`,
    help: "Current number of open server connections.",
    registers: [this.registry],
  });

  readonly knownServerCount = new Gauge({
    name: `${NS}_known_server_count`,
    help: "Current number of servers agent is trying to connect to.",
    registers: [this.registry],
  });

  readonly openEndpointConnections = new Gauge({
    name: `${NS}_open_endpoint_connections`,
    help: "Current number of open endpoint connections.",
    registers: [this.registry],
  });

  readonly streamPackets = new PacketCounter<AgentStreamSegment>({
    name: `${NS}_stream_packets_total`,
    help: "Count of packets processed, by segment and packet type (example: from_client, DIAL_REQ)",
    registers: [this.registry],
  });

  readonly streamErrors = new Counter({
    name: `${NS}_stream_errors_total`,
    help: "Count of gRPC stream errors, by segment, grpc Code, packet type. (example: from_agent, Code.Unavailable, DIAL_RSP)",
    labelNames: ["segment", "code", "packet_type"] as const,
    registers: [this.registry],
  });

  /** Ours, apart from endpoint_dial_failure_total: nothing was dialed, and it may be an attack. */
  readonly destinationRefusals = new Counter({
    name: "kgw_agent_destination_refusals_total",
    help: "Dials refused by the destination policy before any connect, by rule: link_local, loopback, no_rule and malformed (the tenant's egress policy), bad_policy.",
    labelNames: ["rule"] as const,
    registers: [this.registry],
  });

  readonly serverConnectAttempts = new Counter({
    name: "kgw_agent_server_connect_attempts_total",
    help: "Attempts to open a stream to a proxy server, by outcome (connected, duplicate, surplus: a hedged attempt answered after the set was complete, failed).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  readonly serverConnectHedges = new Counter({
    name: "kgw_agent_server_connect_hedges_total",
    help: "Connect attempts started alongside one unanswered for a second while the agent had no server (a frozen or slow server behind the load balancer).",
    registers: [this.registry],
  });
}
