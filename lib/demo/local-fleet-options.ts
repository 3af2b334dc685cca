/**
 * What `npm run fleet:local` can be told, and the ports it uses: flags parsed and checked here
 * once, the port layout derived from them in one place (so the busy-port message, the instances'
 * flags and the printed curl lines agree).
 */
import { createServer } from "node:net";
import { defineFlags, formatHelp, parseFlags } from "../config/flags.js";
import { PORTS_FILE_FLAG } from "../config/ports-file-flag.js";
import { ConfigError } from "../errors.js";
import { addressInUse } from "./address-in-use.js";

export const INSTANCES = [1, 2, 3] as const;
export type InstanceNumber = (typeof INSTANCES)[number];

/** The highest port an instance's layout reaches above the base (instance 3's peer port). */
const LAYOUT_SPAN = 335;
const MAX_PORT = 65_535;

export const LOCAL_FLEET_FLAGS = defineFlags({
  once: {
    kind: "bool",
    default: false,
    help: "Make the requests, kill the instance holding the agent, show it move and a request still going through, then stop.",
  },
  "base-port": {
    kind: "port",
    default: 18_000,
    help: `Ports are this plus: 32 the load balancer (every role, like 8132); 100*i+32..35 instance i's agent, admin, health and peer ports; 93, 94 the agent's health and admin. Change it when one of them is taken (up to ${MAX_PORT - LAYOUT_SPAN}).`,
  },
  "ephemeral-ports": {
    kind: "bool",
    default: false,
    help: "Let every process pick free ports instead (printed once it runs).",
  },
  "ports-file": {
    ...PORTS_FILE_FLAG,
    help: "Once the fleet serves its first requests, write the balancer's and each instance's ports to this file as one JSON object; removed on exit. Off when empty.",
  },
});

export interface LocalFleetOptions {
  once: boolean;
  /** null: --ephemeral-ports. */
  basePort: number | null;
  portsFile: string;
}

export type ParsedLocalFleet = { help: true; text: string } | { help: false; options: LocalFleetOptions };

export function parseLocalFleetOptions(argv: readonly string[]): ParsedLocalFleet {
  const f = parseFlags(LOCAL_FLEET_FLAGS, argv);
  if (f.help) {
    return {
      help: true,
      text: formatHelp(
        "npm run fleet:local -- [flags]",
        "A local fleet of three kgw server instances behind a TCP load balancer, with tenant acme and its agent.",
        LOCAL_FLEET_FLAGS,
      ),
    };
  }
  const v = f.values;
  if (v["ephemeral-ports"] && f.explicit.has("base-port")) {
    throw new ConfigError("--base-port and --ephemeral-ports exclude each other");
  }
  if (v["base-port"] + LAYOUT_SPAN > MAX_PORT) {
    throw new ConfigError(
      `--base-port must be at most ${MAX_PORT - LAYOUT_SPAN} (the layout spans ${LAYOUT_SPAN} ports)`,
    );
  }
  return {
    help: false,
    options: {
      once: v.once,
      basePort: v["ephemeral-ports"] ? null : v["base-port"],
      portsFile: v["ports-file"],
    },
  };
}

export interface InstancePorts {
  agent: number;
  admin: number;
  health: number;
  peer: number;
}

export interface FleetPortLayout {
  balancer: number;
  instances: Record<InstanceNumber, InstancePorts>;
  agentHealth: number;
  agentAdmin: number;
}

/** The ports for `basePort`; every one 0 with --ephemeral-ports (null). */
export function portLayout(basePort: number | null): FleetPortLayout {
  const at = (offset: number) => (basePort === null ? 0 : basePort + offset);
  const instance = (i: number): InstancePorts => ({
    agent: at(100 * i + 32),
    admin: at(100 * i + 33),
    health: at(100 * i + 34),
    peer: at(100 * i + 35),
  });
  return {
    balancer: at(32),
    instances: { 1: instance(1), 2: instance(2), 3: instance(3) },
    agentHealth: at(93),
    agentAdmin: at(94),
  };
}

/** Each port of the layout with what it is for, as a busy-port message names it. */
export function namedPorts(layout: FleetPortLayout): { port: number; role: string }[] {
  const named = [{ port: layout.balancer, role: "the load balancer" }];
  for (const i of INSTANCES) {
    const p = layout.instances[i];
    for (const [role, port] of Object.entries(p)) named.push({ port, role: `instance ${i}'s ${role} port` });
  }
  named.push({ port: layout.agentHealth, role: "the agent's health port" });
  named.push({ port: layout.agentAdmin, role: "the agent's admin port" });
  return named;
}

/** A port of the layout is taken: what the operator reads, with the flags that avoid it. */
export class PortInUseError extends ConfigError {
  constructor(
    readonly port: number,
    role: string,
  ) {
    super(
      `port ${port} (${role}) is already in use: stop what holds it, or start the fleet on other ports ` +
        "with --base-port=<another base> or --ephemeral-ports",
    );
  }
}

/**
 * Binds each port of the layout on 127.0.0.1 for a moment, before anything starts, so that a taken
 * port is reported as such rather than as an instance that never became ready. (One taken between
 * this check and its process's listen still shows: that process exits, and its log says why.)
 */
export async function checkPortsFree(layout: FleetPortLayout): Promise<void> {
  for (const { port, role } of namedPorts(layout)) {
    if (port === 0) continue;
    const server = createServer();
    const busy = await new Promise<boolean>((resolve, reject) => {
      server.once("error", (err) => (addressInUse(err) ? resolve(true) : reject(err)));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(false)));
    });
    if (busy) throw new PortInUseError(port, role);
  }
}
