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

export interface HostedParts<T = undefined> {
  fleet: Fleet;
  /**
   * The client the registry and the tenant store share; neither owns it, so destroy it once the
   * gateway has closed (both are done with it then).
   */
  client: DynamoDBClient;
  /** What `alongside` opened while the fleet was joined. */
  alongside: T;
}

/** What joining the fleet reads of the server's options. */
export type StartFleetOptions = Pick<
  ServerOptions,
  "fleet" | "peer" | "serverId" | "backendDialTimeoutMs" | "tlsMinVersion"
>;

/** Something opened beside the fleet (the tenant store's policy), closed if the join fails. */
export interface Closable {
  close?(): void | Promise<void>;
}

/**
 * Joins the fleet `opts.fleet` describes (the caller checked it is set) and meanwhile opens
 * `alongside` (the tenant policy) on the same DynamoDB client. Both wait on their first reads of
 * DynamoDB (the fleet's leases, the tenants), which do not depend on each other: started one after
 * the other they added up (89 and 43 ms of a hosted start on dynalite, docs/PERFORMANCE.md,
 * `startup`). If either fails, the other is undone before the error is thrown.
 */
export async function startFleet<T extends Closable | undefined = undefined>(
  opts: StartFleetOptions,
  deps: { log: Logger; metrics: ServerMetrics; dynamo?: DynamoClientOptions },
  alongside?: (client: DynamoDBClient) => Promise<T>,
): Promise<HostedParts<T>> {
  const config = opts.fleet;
  if (!config || !opts.peer) throw new Error("startFleet needs --registry-table and --peer-port");
  const peerTls = readPeerTls(opts.peer.tls, opts.tlsMinVersion);
  const fleetMetrics = new FleetMetrics(deps.metrics);
  const client = countedDynamoClient(fleetMetrics, deps.dynamo);
  const registry = new DynamoRegistry({ tableName: config.table, client });
  const [joined, opened] = await Promise.allSettled([
    Fleet.start({
      registry,
      instanceId: opts.serverId,
      peerAddress: config.peerAddress,
      heartbeatMs: config.heartbeatMs,
      leaseMs: config.leaseMs,
      agentRedundancy: config.agentRedundancy,
      backendDialTimeoutMs: opts.backendDialTimeoutMs,
      peerTls,
      log: deps.log,
      metrics: fleetMetrics,
    }),
    alongside ? alongside(client) : Promise.resolve(undefined as T),
  ]);
  if (joined.status === "fulfilled" && opened.status === "fulfilled") {
    return { fleet: joined.value, client, alongside: opened.value };
  }
  if (joined.status === "fulfilled") await joined.value.stop(0);
  if (opened.status === "fulfilled") await opened.value?.close?.();
  client.destroy();
  // The fleet's error if both failed: the one a server reported when it joined first.
  throw joined.status === "rejected" ? joined.reason : (opened as PromiseRejectedResult).reason;
}
