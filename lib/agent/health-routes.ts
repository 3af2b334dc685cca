import type { Registry } from "prom-client";
import { type HttpReply, metricsRoute, type Routes } from "../transport/http-endpoints.js";

/**
 * The agent's health port: what kubelet probes and, since in-cluster scrapers often reach only
 * this port, Prometheus scrapes too (as upstream serves it).
 */
export function healthRoutes(ready: () => boolean, registry: Registry): Routes {
  const readiness = (): HttpReply =>
    ready() ? { status: 200, body: "ok" } : { status: 503, body: "no servers connected\n" };
  return {
    "/healthz": () => ({ status: 200, body: "ok" }),
    "/readyz": readiness,
    // Upstream's deprecated spelling, still used by older manifests.
    "/ready": readiness,
    // Upstream serves metrics on the health port too; in-cluster scrapers reach only that one.
    "/metrics": metricsRoute(registry),
  };
}
