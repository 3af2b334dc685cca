import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { PacketCounter, TalliedCounter } from "./tallied-counter.js";

/**
 * Server metrics under upstream's names (`konnectivity_network_proxy_server_*`), so existing
 * dashboards and alerts keep working. One registry per instance: tests run several in a process.
 */
const NS = "konnectivity_network_proxy_server";

/** Upstream's dial failure reasons, plus `no_agent`. */
export type DialFailureReason =
  | "no_agent"
  | "error_response"
  | "unrecognized_response"
  | "send_rsp"
  | "backend_close"
  | "backend_dial_timeout"
  | "frontend_close";

export type StreamSegment = "from_client" | "to_client" | "from_agent" | "to_agent";

export class ServerMetrics {
  readonly registry = new Registry();
  /** Brings the kgw_tenant_* series up to date when the registry is read (tenant-metrics.ts). */
  private tenantCollect: () => void = () => {};
  private throttleCollect: () => void = () => {};
  private peerCollect: () => void = () => {};

  readonly dialDuration = new Histogram({
    name: `${NS}_dial_duration_seconds`,
    help: "Latency of dial to the remote endpoint in seconds",
    buckets: [0.000_1, 0.000_5, 0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 12.5],
    registers: [this.registry],
  });

  readonly dialFailures = new Counter({
    name: `${NS}_dial_failure_count`,
    help: "Number of dial failures observed. Multiple failures can occur for a single dial request.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });

  readonly pendingDials = new Gauge({
    name: `${NS}_pending_backend_dials`,
    help: "Current number of pending backend dial requests",
    registers: [this.registry],
  });

  readonly establishedConnections = new Gauge({
    name: `${NS}_established_connections`,
    help: "Current number of established end-to-end connections (post-dial).",
    registers: [this.registry],
  });

  readonly connectionDuration = new Histogram({
    name: `${NS}_connection_duration_seconds`,
    help: "Duration in seconds a proxied end-to-end connection was established (post-dial) before being closed.",
    buckets: [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 14400, 43200, 86400],
    registers: [this.registry],
  });

  readonly readyBackends = new Gauge({
    name: `${NS}_ready_backend_connections`,
    help: "Number of konnectivity agent connected to the proxy server",
    registers: [this.registry],
  });

  readonly grpcConnections = new Gauge({
    name: `${NS}_grpc_connections`,
    help: "Number of current grpc connections, partitioned by service method.",
    labelNames: ["service_method"] as const,
    registers: [this.registry],
  });

  readonly httpConnections = new Gauge({
    name: `${NS}_http_connections`,
    help: "Number of current HTTP CONNECT connections",
    registers: [this.registry],
  });

  readonly brokenConnectTunnels = new Counter({
    name: "kgw_server_broken_connect_tunnels_total",
    help: "CONNECT tunnels broken off (agent, owner or peer link gone; backend failed), by how the caller was told: signalled (an error after the last byte, TLS), reset (plaintext TCP), destroyed (Unix socket: the caller reads EOF).",
    labelNames: ["end"] as const,
    registers: [this.registry],
  });

  readonly streamPackets = new PacketCounter<StreamSegment>({
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

  readonly rejectedConnections = new Counter({
    name: "kgw_server_rejected_connections_total",
    help: "Connections refused before reaching a tunnel, by listener and reason.",
    labelNames: ["listener", "reason"] as const,
    registers: [this.registry],
  });

  readonly unresponsiveAgents = new Gauge({
    name: "kgw_server_unresponsive_agents",
    help: "Connected agents that stopped answering liveness probes (no new dials are sent to them).",
    registers: [this.registry],
  });

  readonly tlsHandshakes = new Gauge({
    name: "kgw_server_tls_handshakes_in_progress",
    help: "TLS handshakes under way, by listener (bounded by --max-tls-handshakes).",
    labelNames: ["listener"] as const,
    registers: [this.registry],
  });
  readonly tlsHandshakesWaiting = new Gauge({
    name: "kgw_server_tls_handshakes_waiting",
    help: "Connections waiting for their TLS handshake to start, by listener (bounded by --max-tls-handshakes-waiting).",
    labelNames: ["listener"] as const,
    registers: [this.registry],
  });

  /** Sources whose new connections are rate-limited (lib/transport/refusal-throttle.ts). */
  readonly throttledSources = new Gauge({
    name: "kgw_server_throttled_sources",
    help: "Source addresses refused so often that their new TLS handshakes are rate-limited (--refusal-throttle-threshold).",
    registers: [this.registry],
    collect: () => this.throttleCollect(),
  });

  readonly deadHttp2Peers = new Counter({
    name: "kgw_server_http2_dead_peers_total",
    help: "HTTP/2 connections closed because their peer was gone (connection reset) or stopped answering PINGs, by listener.",
    labelNames: ["listener", "reason"] as const,
    registers: [this.registry],
  });

  readonly quotaRefusals = new Counter({
    name: "kgw_server_quota_refusals_total",
    help: "Dials and agent streams refused because their tenant was at a quota, by quota (maxTunnels, dialsPerSecond, maxAgents).",
    labelNames: ["quota"] as const,
    registers: [this.registry],
  });

  readonly egressRefusals = new Counter({
    name: "kgw_server_egress_refusals_total",
    help: "Dials the server refused by their tenant's egress policy before forwarding, by the rule that refused them (loopback, link_local, no_rule, no_tenant).",
    labelNames: ["rule"] as const,
    registers: [this.registry],
  });

  readonly revokedStreams = new Counter({
    name: "kgw_server_revoked_streams_total",
    help: "Agent streams, frontend calls and CONNECT tunnels closed because the credential that opened them was revoked, expired or its tenant deleted, by role.",
    labelNames: ["role"] as const,
    registers: [this.registry],
  });

  readonly tenantStoreErrors = new Counter({
    name: "kgw_server_tenant_store_errors_total",
    help: "Failed reads of the tenant store, or records that could not be read (the last known records stay in use).",
    registers: [this.registry],
  });

  /** GET /v1/install/<token>.yaml on the gateway port (lib/server/install/install-route.ts). */
  readonly installRequests = new Counter({
    name: "kgw_server_install_requests_total",
    help: "Agent manifest fetches by outcome: ok, not_found, gone, bad_request, throttled, busy, error.",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  // Peer links between the instances of a fleet (lib/fleet/peer/).

  readonly peerDials = new Counter({
    name: "kgw_server_peer_dials_total",
    help: "Dials this instance forwarded to another over a peer link, by outcome (established, not_here, unavailable, failed, cancelled, timeout).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  readonly peerDialsServed = new Counter({
    name: "kgw_server_peer_dials_served_total",
    help: "Dials other instances forwarded to this one, by outcome (established, not_here, failed, cancelled, invalid).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  readonly peerConnections = new Gauge({
    name: "kgw_server_peer_connections",
    help: "Peer link connections open now, by role (client: to other instances; server: from them).",
    labelNames: ["role"] as const,
    registers: [this.registry],
  });

  readonly peerProbes = new Counter({
    name: "kgw_server_peer_probes_total",
    help: "Peers this instance asked for a tenant's agents, by answer (has_agents, no_agents, unavailable, refused, timeout) and reason (registry_unreadable; no_live_owner: no owner the registry names took a dial).",
    labelNames: ["answer", "reason"] as const,
    registers: [this.registry],
  });

  readonly peerProbesServed = new Counter({
    name: "kgw_server_peer_probes_served_total",
    help: "Other instances' questions for a tenant's agents here, by outcome (has_agents, no_agents, invalid).",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });

  readonly peerLinkFailures = new Counter({
    name: "kgw_server_peer_link_failures_total",
    help: "Failures of this instance's peer links (each then avoided for a backoff), by reason (connect, goaway, closed, keepalive, stream).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });

  readonly peerLinks = new Gauge({
    name: "kgw_server_peer_links",
    help: "Peer instances (id and incarnation) this one keeps a link to, connected or not; pruned once their lease is gone.",
    registers: [this.registry],
    collect: () => this.peerCollect(),
  });

  readonly failingPeers = new Gauge({
    name: "kgw_server_peer_failing",
    help: "Peer instances this one currently avoids after a failed connection or link (for a backoff period).",
    registers: [this.registry],
    collect: () => this.peerCollect(),
  });

  readonly tunnelBytes = new TalliedCounter<"direction">({
    name: "kgw_server_tunnel_bytes_total",
    help: "Bytes carried through tunnels, by direction (to_agent, to_client).",
    labelNames: ["direction"] as const,
    registers: [this.registry],
  });
  readonly bytesToAgent = this.tunnelBytes.slot({ direction: "to_agent" });
  readonly bytesToClient = this.tunnelBytes.slot({ direction: "to_client" });

  // Per tenant: the first --tenant-metrics-limit tenants are labelled with their id, the rest
  // are summed under tenant="_other" (lib/server/audit/tenant-metrics.ts). In the drop-in, the
  // tenant is "default".

  readonly tenantDials = new Counter({
    name: "kgw_tenant_dials_total",
    help: 'Dials by tenant and outcome (ok, broken, drained, refused, denied, unavailable, timeout, cancelled, failed); tenants beyond --tenant-metrics-limit are counted as tenant="_other".',
    labelNames: ["tenant", "outcome"] as const,
    registers: [this.registry],
    collect: () => this.tenantCollect(),
  });

  readonly tenantBytes = new Counter({
    name: "kgw_tenant_bytes_total",
    help: "Bytes carried through a tenant's tunnels, by direction (to_agent: from the caller; to_client: to the caller).",
    labelNames: ["tenant", "direction"] as const,
    registers: [this.registry],
    collect: () => this.tenantCollect(),
  });

  readonly tenantTunnelsOpen = new Gauge({
    name: "kgw_tenant_tunnels_open",
    help: "Tunnels established and open now, by tenant.",
    labelNames: ["tenant"] as const,
    registers: [this.registry],
    collect: () => this.tenantCollect(),
  });

  readonly tenantAgents = new Gauge({
    name: "kgw_tenant_agents",
    help: "Agents connected to this instance, by tenant.",
    labelNames: ["tenant"] as const,
    registers: [this.registry],
    collect: () => this.tenantCollect(),
  });

  readonly auditDroppedRecords = new Counter({
    name: "kgw_server_audit_dropped_records_total",
    help: "Audit records dropped because the audit log fell too far behind (its buffer was full).",
    registers: [this.registry],
  });

  readonly auditWriteErrors = new Counter({
    name: "kgw_server_audit_write_errors_total",
    help: "Failed writes to the audit log (the records stay buffered and are retried, up to the buffer's bound).",
    registers: [this.registry],
  });

  readonly emfErrors = new Counter({
    name: "kgw_server_metrics_emf_errors_total",
    help: "Metric sets for CloudWatch (--metrics-emf-interval) that could not be read or written, or were dropped because stdout fell behind.",
    registers: [this.registry],
  });

  /** Sets what refreshes kgw_server_peer_failing and _links before each read (lib/fleet/peer/peer-links.ts). */
  onPeerCollect(collect: () => void): void {
    this.peerCollect = collect;
  }

  /** Sets what refreshes kgw_server_throttled_sources before each read. */
  onThrottleCollect(collect: () => void): void {
    this.throttleCollect = collect;
  }

  /** Sets what brings the kgw_tenant_* series up to date before each read (one per registry). */
  onTenantCollect(collect: () => void): void {
    this.tenantCollect = collect;
  }
}
