/**
 * Hosted mode's extra parts, built from the options: one DynamoDB client for the registry and
 * the tenant store (its requests counted by operation, retries included), and this instance's
 * membership of the fleet. services/server/main.ts calls these; tests start fleets the same way.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { ServerOptions } from "../config/server-options.js";
import { FleetMetrics } from "../metrics/fleet-metrics.js";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import { createDynamoClient, type DynamoClientOptions } from "../registry/dynamo/client.js";
import { DynamoRegistry } from "../registry/dynamo/dynamo-registry.js";
import { Fleet } from "./fleet.js";
import { readPeerTls } from "./peer/peer-links.js";

/** A DynamoDB client whose every request (each retry too) is counted in kgw_fleet_registry_requests_total. */
export function countedDynamoClient(
  fleetMetrics: FleetMetrics,
  options: DynamoClientOptions = {},
): DynamoDBClient {
  const client = createDynamoClient(options);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      fleetMetrics.registryRequests.inc({ operation: String(context.commandName ?? "unknown") });
      return next(args);
    },
    // Below the retry middleware (finalizeRequest, high priority): once per attempt.
    { step: "finalizeRequest", priority: "low", name: "kgwCountRegistryRequests" },
  );
  return client;
}

export interface HostedParts {
  fleet: Fleet;
  /**
   * The client the registry and the tenant store share; neither owns it, so destroy it once the
   * gateway has closed (both are done with it then).
   */
  client: DynamoDBClient;
}

/** Joins the fleet `opts.fleet` describes (the caller checked it is set). */
/** What joining the fleet reads of the server's options. */
export type StartFleetOptions = Pick<
  ServerOptions,
  "fleet" | "peer" | "serverId" | "backendDialTimeoutMs" | "tlsMinVersion"
>;

export async function startFleet(
  opts: StartFleetOptions,
  deps: { log: Logger; metrics: ServerMetrics; dynamo?: DynamoClientOptions },
): Promise<HostedParts> {
  const config = opts.fleet;
  if (!config || !opts.peer) throw new Error("startFleet needs --registry-table and --peer-port");
  const fleetMetrics = new FleetMetrics(deps.metrics);
  const client = countedDynamoClient(fleetMetrics, deps.dynamo);
  const registry = new DynamoRegistry({ tableName: config.table, client });
  const fleet = await Fleet.start({
    registry,
    instanceId: opts.serverId,
    peerAddress: config.peerAddress,
    heartbeatMs: config.heartbeatMs,
    leaseMs: config.leaseMs,
    agentRedundancy: config.agentRedundancy,
    backendDialTimeoutMs: opts.backendDialTimeoutMs,
    peerTls: readPeerTls(opts.peer.tls, opts.tlsMinVersion),
    log: deps.log,
    metrics: fleetMetrics,
  });
  return { fleet, client };
}
