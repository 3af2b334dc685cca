/**
 * Tenants from a tenant store (--tenant-store-dir, or the fleet's table), whose watch keeps a
 * snapshot of every tenant in memory and is closed with the gateway; open-policy.ts loads this
 * only in tenant mode.
 */
import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import type { ServerOptions } from "../../config/server-options.js";
import { ConfigError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { openFileTenantStore } from "../../tenancy/file-store/file-tenant-store.js";
import type { TenantStore } from "../../tenancy/store.js";
import { openInstallRoute } from "../install/open-install-route.js";
import type { GatewayPolicy } from "./gateway-policy.js";
import { tenantPolicy } from "./tenant-policy.js";

export async function openTenantPolicy(
  tenancy: NonNullable<ServerOptions["tenancy"]>,
  log: Logger,
  metrics: ServerMetrics,
  /** The DynamoDB client a fleet's tenant store uses (shared with the registry; not closed here). */
  dynamo?: DynamoDBClient,
): Promise<GatewayPolicy> {
  // How the operator named the store, for every error about it.
  const where =
    tenancy.store.kind === "dir"
      ? `--tenant-store-dir ${tenancy.store.dir}`
      : `--registry-table ${tenancy.store.table}`;
  let store: TenantStore;
  try {
    store =
      tenancy.store.kind === "dir"
        ? await openFileTenantStore(tenancy.store.dir)
        : // Loaded only when used: the AWS SDK slows every other server's start-up.
          (await import("../../tenancy/dynamo-store/dynamo-tenant-store.js")).openDynamoTenantStore({
            tableName: tenancy.store.table,
            ...(dynamo ? { client: dynamo } : {}),
          });
  } catch (err) {
    throw new ConfigError(`${where}: ${(err as Error).message}`, { cause: err });
  }
  const watch = store.watch({ intervalMs: tenancy.watchIntervalMs });
  try {
    // A server that never read its tenants would refuse everyone: better not to start.
    await watch.ready;
  } catch (err) {
    watch.close();
    await store.close();
    throw new ConfigError(`${where}: cannot read the tenants: ${(err as Error).message}`, {
      cause: err,
    });
  }
  let install: Awaited<ReturnType<typeof openInstallRoute>> | undefined;
  try {
    install = tenancy.install ? await openInstallRoute(tenancy.install, { store, log, metrics }) : undefined;
  } catch (err) {
    watch.close();
    await store.close();
    throw err;
  }
  const policy = tenantPolicy({
    watch,
    udsTenant: tenancy.udsTenant,
    recheckIntervalMs: tenancy.watchIntervalMs,
    defaultQuotas: tenancy.defaultQuotas,
    log,
    metrics,
  });
  log.info(
    { store: where, watchIntervalMs: tenancy.watchIntervalMs },
    "serving the tenants of the tenant store",
  );
  return {
    ...policy,
    ...(install ? { install } : {}),
    close: async () => {
      policy.close();
      watch.close();
      await store.close();
    },
  };
}
