/**
 * The fleet's flags (hosted mode, lib/fleet/): the DynamoDB table that is both the registry and
 * the tenant store, where this instance's peer port is reachable, the lease's timing, and how
 * many instances agents should hold streams to. Parsed and checked here, once; SERVER_FLAGS
 * includes these.
 */
import { networkInterfaces } from "node:os";
import { ConfigError } from "../errors.js";
import { DEFAULT_HEARTBEAT_MS, DEFAULT_LEASE_MS, MIN_HEARTBEATS_PER_LEASE } from "../registry/durations.js";
import { defineFlags, type FlagValues } from "./flags.js";
import { splitHostPort } from "./host-port.js";

/**
 * Instances an agent is asked to hold streams to (serverCount), capped by the instances alive:
 * with two, a tenant survives losing either instance with no failed dial but those in flight.
 */
export const DEFAULT_AGENT_REDUNDANCY = 2;

export const FLEET_FLAGS = defineFlags({
  "registry-table": {
    kind: "string",
    default: "",
    help: "Hosted fleet mode: the DynamoDB table holding the fleet registry and the tenant store (endpoint, region and credentials from the AWS SDK's standard configuration). Needs --peer-port.",
    env: "KGW_REGISTRY_TABLE",
  },
  "peer-advertise-address": {
    kind: "string",
    default: "",
    help: "With --registry-table: host:port other instances dial for this one's peer port (default: the first non-internal IPv4 address and --peer-port).",
  },
  "lease-heartbeat": {
    kind: "duration",
    default: DEFAULT_HEARTBEAT_MS,
    help: "With --registry-table: how often this instance renews its lease (one registry write, whatever the number of agents).",
  },
  "lease-duration": {
    kind: "duration",
    default: DEFAULT_LEASE_MS,
    help: `With --registry-table: how long a lease lasts unrenewed; at least ${MIN_HEARTBEATS_PER_LEASE} heartbeats. Bounds how long a killed instance is still routed to when nothing else tells.`,
  },
  "agent-redundancy": {
    kind: "int",
    default: DEFAULT_AGENT_REDUNDANCY,
    help: "With --registry-table: instances each agent should hold streams to, sent as serverCount (capped by the instances alive; --server-count is ignored).",
  },
});

export interface FleetConfig {
  table: string;
  /** host:port of this instance's peer port as the others reach it. */
  peerAddress: string;
  heartbeatMs: number;
  leaseMs: number;
  agentRedundancy: number;
}

type FleetFlagValues = FlagValues<typeof FLEET_FLAGS>;

/** The fleet's settings, or null without --registry-table; `peerPort` is --peer-port (0: off). */
export function parseFleet(
  f: FleetFlagValues,
  peerPort: number,
  interfaces = networkInterfaces,
): FleetConfig | null {
  if (!f["registry-table"]) {
    if (f["peer-advertise-address"]) throw new ConfigError("--peer-advertise-address needs --registry-table");
    return null;
  }
  if (!/^[A-Za-z0-9_.-]{3,255}$/.test(f["registry-table"])) {
    throw new ConfigError(`--registry-table: "${f["registry-table"]}" is not a DynamoDB table name`);
  }
  if (peerPort === 0) {
    throw new ConfigError(
      "--registry-table needs --peer-port: instances of a fleet forward dials to each other",
    );
  }
  if (f["lease-heartbeat"] <= 0) throw new ConfigError("--lease-heartbeat must be positive");
  if (f["lease-duration"] < MIN_HEARTBEATS_PER_LEASE * f["lease-heartbeat"]) {
    throw new ConfigError(
      `--lease-duration must be at least ${MIN_HEARTBEATS_PER_LEASE} times --lease-heartbeat (a lease must survive a lost heartbeat or two)`,
    );
  }
  if (f["agent-redundancy"] < 1) throw new ConfigError("--agent-redundancy must be at least 1");
  return {
    table: f["registry-table"],
    peerAddress: advertised(f["peer-advertise-address"], peerPort, interfaces),
    heartbeatMs: f["lease-heartbeat"],
    leaseMs: f["lease-duration"],
    agentRedundancy: f["agent-redundancy"],
  };
}

function advertised(given: string, peerPort: number, interfaces: typeof networkInterfaces): string {
  if (given) {
    if (!splitHostPort(given)) throw new ConfigError(`--peer-advertise-address: "${given}" is not host:port`);
    return given;
  }
  // A Fargate task (awsvpc) has one ENI: its private address is what the other tasks reach.
  // Link-local addresses (169.254/16: the ECS agent's and metadata endpoints' side of a task)
  // are never it.
  for (const list of Object.values(interfaces())) {
    for (const a of list ?? []) {
      if (a.family === "IPv4" && !a.internal && !a.address.startsWith("169.254."))
        return `${a.address}:${peerPort}`;
    }
  }
  throw new ConfigError("--peer-advertise-address is needed: this host has no non-internal IPv4 address");
}
