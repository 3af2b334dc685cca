/**
 * The gateway's one routing seam: where a dial goes beyond this instance's own agents, and who
 * serves the peer port (--peer-port) where other instances forward dials to ours. A fleet
 * (lib/fleet/fleet.ts) brings both with its membership; without a fleet, the caller may pass
 * them alone (a peer port on its own, a test's forwarding directory). lib/server imports nothing
 * of lib/fleet: what it needs of it is declared here, and the fleet implements it.
 */
import type { AddressInfo } from "node:net";
import type { ServerOptions } from "../config/server-options.js";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import type { BackendRegistry } from "./core/backend-registry.js";
import type { AgentDirectory, Dialer } from "./core/dial-context.js";
import { markRoutingSteps } from "./dial-step-marks.js";
import type { ListenerSet } from "./listeners/listener-set.js";
import type { InstanceAnswer } from "./status/fleet-status.js";
import type { InstanceSlice } from "./status/status-model.js";

/** What the gateway gives the peer port's listener. */
export interface PeerListenerDeps {
  /** The gateway's local-only dialer (no forwarding). */
  dialer: Dialer;
  /** The tenant's agents here that take dials now (0 while draining): a peer's probe's answer. */
  agentsOf: (tenant: string) => number;
  /** This instance's status slice (only `tenant`'s part, when given): a peer's status call's answer. */
  status: (tenant?: string) => InstanceSlice;
  log: Logger;
  metrics: ServerMetrics;
}

/** Builds the peer listener on `set` and listens; resolves with its address. */
export type PeerListenerBuilder = (
  set: ListenerSet,
  opts: Pick<ServerOptions, "peer" | "handshakes" | "tlsMinVersion">,
  deps: PeerListenerDeps,
) => Promise<AddressInfo>;

export interface GatewayRouting {
  /**
   * Where dials go, given the local agent registry; without it, the registry itself.
   */
  directory?(local: BackendRegistry): AgentDirectory;
  /** Serves --peer-port; a gateway started with --peer-port needs it. */
  servePeers?: PeerListenerBuilder;
}

/** What the gateway needs of its fleet (lib/fleet/fleet.ts implements it). */
export interface FleetMembership extends GatewayRouting {
  directory(local: BackendRegistry): AgentDirectory;
  servePeers: PeerListenerBuilder;
  serverCount(): number;
  /** Calls `listener` when serverCount changes; returns an unsubscribe function. */
  onServerCountChange(listener: (count: number) => void): () => void;
  ready(): boolean;
  /** For /readyz?verbose on the admin port. */
  state(): object;
  /**
   * Every instance the registry names, with its status slice (asked of each live peer over its
   * peer link, `self` for this one) or why there is none: the admin port's status API. Never
   * rejects; bounded in time and in streams open at once.
   */
  statusOf(self: InstanceSlice, tenant: string | undefined): Promise<InstanceAnswer[]>;
  /** Tell the fleet to route elsewhere; never throws. */
  drain(): Promise<void>;
  /** Leave the fleet: rows and lease released (within `flushMs`), peer links closed. */
  stop(flushMs: number): Promise<void>;
}

/**
 * Where the gateway's dials go: the routing's directory over the local registry, else the
 * registry itself; with the dial's steps marked around it under --dial-step-metrics.
 */
export function directoryOf(
  routing: GatewayRouting,
  local: BackendRegistry,
  markSteps: boolean,
): AgentDirectory {
  return markRoutingSteps(routing.directory?.(local) ?? local, markSteps);
}
