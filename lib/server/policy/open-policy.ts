/**
 * The policy a server's options ask for: the single-tenant drop-in (credentials from flags and
 * files), or tenants from a tenant store (open-tenant-policy.ts), loaded only then: the tenant
 * store, the install route and the tenant policy are some forty modules a drop-in server would
 * otherwise compile on its way to listening (docs/PERFORMANCE.md, `startup`).
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { ServerOptions } from "../../config/server-options.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { type GatewayPolicy, type SingleTenantPolicyOptions, singleTenantPolicy } from "./gateway-policy.js";

/** The tenant store's settings, or (null) the drop-in's credentials. */
export type PolicyOptions = Pick<ServerOptions, "tenancy"> & SingleTenantPolicyOptions;

export async function openPolicy(
  opts: PolicyOptions,
  log: Logger,
  metrics: ServerMetrics,
  /** The DynamoDB client a fleet's tenant store uses (shared with the registry; not closed here). */
  dynamo?: DynamoDBClient,
): Promise<GatewayPolicy> {
  const tenancy = opts.tenancy;
  if (!tenancy) return singleTenantPolicy(opts);
  return (await import("./open-tenant-policy.js")).openTenantPolicy(tenancy, log, metrics, dynamo);
}
