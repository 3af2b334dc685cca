/**
 * What a gateway is given (its injected policy, fleet, routing, metrics and audit sink) and the
 * addresses it reports once listening: the composition root's contract (gateway.ts), apart from
 * its wiring.
 */
import type { AddressInfo } from "node:net";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import type { AuditSink } from "./audit/audit-sink.js";
import type { GatewayPolicy } from "./policy/gateway-policy.js";
import type { FleetMembership, GatewayRouting } from "./routing.js";

export interface GatewayAddresses {
  frontend: AddressInfo | null;
  uds: string | null;
  agent: AddressInfo;
  admin: AddressInfo;
  health: AddressInfo;
  /** The fleet peer port (--peer-port); null when off. */
  peer: AddressInfo | null;
  /** The install-only TLS port (--install-port); null when off. */
  install: AddressInfo | null;
}

export interface GatewayDeps {
  log: Logger;
  /**
   * Authentication and authorization (policy/open-policy.ts picks the drop-in's or the tenant
   * store's). The gateway closes it when it closes.
   */
  policy: GatewayPolicy;
  /**
   * Hosted fleet membership (lib/fleet/fleet.ts): where dials go and who serves the peer port
   * (routing.ts), the serverCount agents are told, readiness (the lease, agents or not) and the
   * first and last steps of a shutdown.
   */
  fleet?: FleetMembership;
  /**
   * Without a fleet: where dials go, and who serves --peer-port when it is on (a peer port on its
   * own, a test's forwarding directory). Ignored when a fleet is given: it brings its own.
   */
  routing?: GatewayRouting;
  metrics?: ServerMetrics;
  /**
   * Where each dial's audit record goes. Without one, the gateway opens what --audit-log names
   * (nothing when it is empty). The gateway closes it when it closes.
   */
  audit?: AuditSink;
  /**
   * Told of the bytes of every chunk read from a CONNECT caller once its tunnel carries data: the
   * scavenge pacer (lib/transport/scavenge-pacer.ts) that `kgw server` runs. Tests leave it out.
   */
  callerBytesRead?: (bytes: number) => void;
}
