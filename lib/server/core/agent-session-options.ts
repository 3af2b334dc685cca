/** What an AgentSession is told at admission: who the agent is, and how to run its stream. */
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import type { AgentIdentifiers } from "../../proto/headers.js";
import type { FlowMode } from "../../tunnel/flow-control.js";
import type { LivenessTimes } from "./agent-liveness.js";

export interface AgentInfo {
  agentId: string;
  identifiers: AgentIdentifiers;
  tenant: string;
  /** How the agent proved who it is, for logs and audit: "cert:CN" or "token". */
  identity: string;
  /** Where the stream comes from ("address:port") and on which transport, for the status API. */
  peer?: string;
  transport?: "grpc" | "tunnel";
  /** The version the agent said it runs (kgw-agent-version); null when it did not say. */
  version?: string | null;
  /** When the stream was admitted (ms since the epoch). */
  connectedAt?: number;
}

export interface AgentSessionOptions {
  /** 0 disables the timeout. */
  dialTimeoutMs: number;
  /** "credit" when the agent offered per-connection flow control and we accepted. */
  flow: FlowMode;
  /**
   * The agent asked for each dial's egress policy (lib/egress/egress-wire.ts): only then does a
   * DIAL_REQ carry it, so an upstream agent never sees a field it does not know.
   */
  egress?: boolean;
  /**
   * The agent asked to be told when this server drains (lib/tunnel/drain-advice.ts): only then
   * does `adviseDrain` send it a DRAIN packet, which an upstream agent is never sent.
   */
  drainAdvice?: boolean;
  /**
   * The agent asked to be told when serverCount changes (lib/tunnel/server-count-updates.ts),
   * and was answered `announced` in the headers: `announceServerCount` sends it changes since.
   */
  serverCountUpdates?: { announced: number };
  /** When the agent counts as unresponsive, and when as dead (agent-liveness.ts). */
  liveness: LivenessTimes;
  log: Logger;
  metrics: ServerMetrics;
}
