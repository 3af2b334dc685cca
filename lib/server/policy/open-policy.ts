/**
 * The policy a server's options ask for: the single-tenant drop-in (credentials from flags and
 * files), or tenants from a tenant store (--tenant-store-dir), whose watch keeps a snapshot of
 * every tenant in memory and is closed with the gateway.
 */
import type { ServerOptions } from "../../config/server-options.js";
import { ConfigError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { openFileTenantStore } from "../../tenancy/file-store/file-tenant-store.js";
import { openInstallRoute } from "../install/open-install-route.js";
import { type GatewayPolicy, singleTenantPolicy } from "./gateway-policy.js";
import { tenantPolicy } from "./tenant-policy.js";

export async function openPolicy(
  opts: ServerOptions,
  log: Logger,
  metrics: ServerMetrics,
): Promise<GatewayPolicy> {
  const tenancy = opts.tenancy;
  if (!tenancy) return singleTenantPolicy(opts);
  let store: Awaited<ReturnType<typeof openFileTenantStore>>;
  try {
    store = await openFileTenantStore(tenancy.storeDir);
  } catch (err) {
    throw new ConfigError(`--tenant-store-dir ${tenancy.storeDir}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  const watch = store.watch({ intervalMs: tenancy.watchIntervalMs });
  try {
    // A server that never read its tenants would refuse everyone: better not to start.
    await watch.ready;
  } catch (err) {
    watch.close();
    await store.close();
    throw new ConfigError(
      `--tenant-store-dir ${tenancy.storeDir}: cannot read the tenants: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
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
    { storeDir: tenancy.storeDir, watchIntervalMs: tenancy.watchIntervalMs },
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
