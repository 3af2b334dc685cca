import type { HttpReply, Routes } from "../transport/http-endpoints.js";

/**
 * The agent's health port: what kubelet probes. It listens on all interfaces by default (kubelet
 * probes the pod IP), so it serves liveness and readiness only. Metrics are on the admin port
 * (loopback by default): what the tunnel carries is no business of every pod that can reach the
 * agent. Upstream serves /metrics on both ports (docs/COMPATIBILITY.md).
 */
export function healthRoutes(ready: () => boolean): Routes {
  const readiness = (): HttpReply =>
    ready() ? { status: 200, body: "ok" } : { status: 503, body: "no servers connected\n" };
  return {
    "/healthz": () => ({ status: 200, body: "ok" }),
    "/readyz": readiness,
    // Upstream's deprecated spelling, still used by older manifests.
    "/ready": readiness,
  };
}
