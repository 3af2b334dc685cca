/**
 * The gateway's two HTTP ports: health (8134: /healthz, /readyz, for kubelet and the load
 * balancer) and admin (8133: /metrics, per-tenant /readyz, the status API; the operator's, on
 * loopback or the VPC). Per-tenant answers are on the admin port only: health-routes.ts says why.
 */
import type { ServerOptions } from "../config/server-options.js";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import {
  metricsRoute,
  type Routes,
  type RunningHttpServer,
  startHttpServer,
} from "../transport/http-endpoints.js";
import { adminReadinessRoutes, healthRoutes, type ReadinessState } from "./health-routes.js";

export interface HttpPortsDeps {
  readiness: ReadinessState;
  metrics: ServerMetrics;
  /** The admin port's status API (status/status-routes.ts). */
  status: Routes;
  log: Logger;
}

/** Starts both; each one started is pushed on `started` (closed by the gateway, even on failure). */
export async function startHttpPorts(
  opts: Pick<ServerOptions, "health" | "admin">,
  deps: HttpPortsDeps,
  started: RunningHttpServer[],
): Promise<{ health: RunningHttpServer; admin: RunningHttpServer }> {
  const log = deps.log.child({ component: "http" });
  const health = await startHttpServer(opts.health.host, opts.health.port, healthRoutes(deps.readiness), log);
  started.push(health);
  const admin = await startHttpServer(
    opts.admin.host,
    opts.admin.port,
    {
      "/metrics": metricsRoute(deps.metrics.registry),
      ...adminReadinessRoutes(deps.readiness),
      ...deps.status,
    },
    log,
  );
  started.push(admin);
  return { health, admin };
}
