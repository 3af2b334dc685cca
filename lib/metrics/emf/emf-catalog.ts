/**
 * Which of the gateway's Prometheus series reach CloudWatch, under which names, units and
 * dimensions (docs/DEPLOY.md, "Metrics and dashboard"). The CDK app's dashboard and alarms read
 * the names from here, so a metric they show is one the gateway writes.
 *
 * Cardinality is money: every distinct (name, dimensions) costs $0.30 a month. No metric carries
 * a tenant: per-tenant questions are answered from the audit log (Logs Insights) or /metrics.
 * Per instance: a fixed set. Fleet-wide: the counters and gauges alarms need, aggregated by
 * CloudWatch across instances. Breakdowns (by outcome, by refusal reason) are fleet-wide, written
 * only in intervals where they are not zero, and capped in the number of values.
 */

/** The namespace unless --metrics-emf-namespace says otherwise. */
export const DEFAULT_EMF_NAMESPACE = "kgw";

/** The Fleet dimension of an instance without --registry-table. */
export const STANDALONE_FLEET = "standalone";

export const EMF_DIMENSIONS = {
  /** One fleet per registry table: the table's name. */
  fleet: "Fleet",
  /** The instance's --server-id (random per process unless set), as in the audit records. */
  instance: "Instance",
  outcome: "Outcome",
  reason: "Reason",
} as const;

/**
 * A root member naming what the line is, so the log router can tell these documents from log
 * lines and audit records (cdk/log-router/kgw.conf); EMF ignores members it does not know.
 */
export const EMF_RECORD_FIELD = "record";
export const EMF_RECORD_VALUE = "metrics";

/**
 * Dial outcomes (the `outcome` label of kgw_tenant_dials_total) that mean the gateway or the
 * fleet failed the dial: nothing reached an agent that should have (unavailable), no answer in
 * time (timeout), a tunnel that broke after it was up (broken) or an internal error (failed).
 * Not: refused (the tenant's destination refused), denied (policy and quota did their job),
 * cancelled (the caller gave up), ok.
 */
export const FAILED_DIAL_OUTCOMES = ["unavailable", "timeout", "broken", "failed"] as const;

export type EmfUnit = "Count" | "Bytes";

/** Prometheus series summed into one CloudWatch value. */
export interface EmfSource {
  metric: string;
  /** Only series whose label has one of these values. */
  where?: { label: string; values: readonly string[] };
}

export interface EmfMetricSpec {
  name: string;
  unit: EmfUnit;
  /** gauge: the value now; counter: the increase since the previous document. */
  kind: "gauge" | "counter";
  sources: readonly EmfSource[];
  /** Also under [Fleet] alone (CloudWatch adds the instances' points), not only [Fleet, Instance]. */
  fleetWide: boolean;
  /** What it means, for docs and the dashboard. */
  description: string;
}

/** A counter split by one dimension whose value comes from the series' labels. */
export interface EmfBreakdownSpec {
  name: string;
  unit: EmfUnit;
  dimension: (typeof EMF_DIMENSIONS)["outcome" | "reason"];
  sources: readonly {
    metric: string;
    value: (labels: Readonly<Partial<Record<string, string | number>>>) => string;
  }[];
  description: string;
}

const REFUSAL_SOURCES = [
  { metric: "kgw_server_quota_refusals_total", value: (l: Labels) => `quota:${l.quota}` },
  { metric: "kgw_server_egress_refusals_total", value: (l: Labels) => `egress:${l.rule}` },
  { metric: "kgw_server_rejected_connections_total", value: (l: Labels) => `${l.listener}:${l.reason}` },
] as const;
type Labels = Readonly<Partial<Record<string, string | number>>>;

export const GATEWAY_EMF_METRICS = {
  agents: {
    name: "Agents",
    unit: "Count",
    kind: "gauge",
    sources: [{ metric: "konnectivity_network_proxy_server_ready_backend_connections" }],
    fleetWide: false,
    description: "agent streams connected to the instance",
  },
  tunnels: {
    name: "Tunnels",
    unit: "Count",
    kind: "gauge",
    sources: [{ metric: "konnectivity_network_proxy_server_established_connections" }],
    fleetWide: false,
    description: "tunnels established and open",
  },
  pendingDials: {
    name: "PendingDials",
    unit: "Count",
    kind: "gauge",
    sources: [{ metric: "konnectivity_network_proxy_server_pending_backend_dials" }],
    fleetWide: false,
    description: "dials waiting for their agent's answer",
  },
  dials: {
    name: "Dials",
    unit: "Count",
    kind: "counter",
    sources: [{ metric: "kgw_tenant_dials_total" }],
    fleetWide: true,
    description: "dials that ended, any outcome",
  },
  failedDials: {
    name: "FailedDials",
    unit: "Count",
    kind: "counter",
    sources: [
      { metric: "kgw_tenant_dials_total", where: { label: "outcome", values: FAILED_DIAL_OUTCOMES } },
    ],
    fleetWide: true,
    description: `dials that ended ${FAILED_DIAL_OUTCOMES.join(", ")}`,
  },
  peerDials: {
    name: "PeerDials",
    unit: "Count",
    kind: "counter",
    sources: [
      { metric: "kgw_server_peer_dials_total", where: { label: "outcome", values: ["established"] } },
    ],
    fleetWide: true,
    description: "dials established through another instance over a peer link (the peer hop)",
  },
  refusals: {
    name: "Refusals",
    unit: "Count",
    kind: "counter",
    sources: REFUSAL_SOURCES.map(({ metric }) => ({ metric })),
    fleetWide: true,
    description: "connections, agent streams and dials refused (credential, policy, quota, TLS)",
  },
  registryErrors: {
    name: "RegistryErrors",
    unit: "Count",
    kind: "counter",
    sources: [{ metric: "kgw_fleet_registry_errors_total" }],
    fleetWide: true,
    description: "registry (DynamoDB) calls that failed after their retries",
  },
  leaseHeld: {
    name: "LeaseHeld",
    unit: "Count",
    kind: "gauge",
    sources: [{ metric: "kgw_fleet_lease_held" }],
    fleetWide: true,
    description: "1 while the instance holds its registry lease (Minimum over the fleet: 0 if any does not)",
  },
  auditDropped: {
    name: "AuditRecordsDropped",
    unit: "Count",
    kind: "counter",
    sources: [{ metric: "kgw_server_audit_dropped_records_total" }],
    fleetWide: true,
    description: "audit records dropped because the audit log fell behind",
  },
  tunnelBytes: {
    name: "TunnelBytes",
    unit: "Bytes",
    kind: "counter",
    sources: [{ metric: "kgw_server_tunnel_bytes_total" }],
    fleetWide: false,
    description: "bytes carried through tunnels, both directions",
  },
} as const satisfies Record<string, EmfMetricSpec>;

export const GATEWAY_EMF_BREAKDOWNS = {
  dialsByOutcome: {
    name: "Dials",
    unit: "Count",
    dimension: EMF_DIMENSIONS.outcome,
    sources: [{ metric: "kgw_tenant_dials_total", value: (l: Labels) => String(l.outcome) }],
    description: "dials that ended, by outcome",
  },
  refusalsByReason: {
    name: "Refusals",
    unit: "Count",
    dimension: EMF_DIMENSIONS.reason,
    sources: REFUSAL_SOURCES,
    description: "refusals by reason: quota:<quota>, egress:<rule>, <listener>:<code>",
  },
} as const satisfies Record<string, EmfBreakdownSpec>;

/**
 * Values of one breakdown written per document set; the rest are added under "other". The label
 * values are code constants (outcomes, quota names, error codes), so this is a guard, not a limit
 * expected to be met.
 */
export const MAX_BREAKDOWN_VALUES = 20;
export const BREAKDOWN_OTHER = "other";
