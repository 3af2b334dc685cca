/**
 * The agent's two small HTTP servers. Health (`/healthz`, `/readyz`, and upstream's `/ready` and
 * `/metrics`) is what kubelet probes and Prometheus scrape inside the cluster; admin (`/metrics`)
 * binds to loopback by default. GET and HEAD only; no bodies are read.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import type { Logger } from "../observability/logger.js";
import { HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS } from "./timeouts.js";

export interface HttpReply {
  status: number;
  body: string;
  contentType?: string;
}

/** Path → handler. Handlers are synchronous or return a promise (metrics collection is async). */
export type Routes = Record<string, () => HttpReply | Promise<HttpReply>>;

export interface RunningHttpServer {
  address: AddressInfo;
  close(): Promise<void>;
}

const TEXT = "text/plain; charset=utf-8";

async function respond(
  routes: Routes,
  req: IncomingMessage,
  res: ServerResponse,
  log: Logger,
): Promise<void> {
  let reply: HttpReply;
  const path = (req.url ?? "/").split("?", 1)[0]!;
  const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    reply = { status: 405, body: "method not allowed\n" };
  } else if (!route) {
    reply = { status: 404, body: "not found\n" };
  } else {
    try {
      reply = await route();
    } catch (err) {
      log.error({ err, path }, "http handler failed");
      reply = { status: 500, body: "internal error\n" };
    }
  }
  res.statusCode = reply.status;
  res.setHeader("content-type", reply.contentType ?? TEXT);
  res.setHeader("cache-control", "no-store");
  res.end(req.method === "HEAD" ? undefined : reply.body);
}

export async function startHttpServer(
  host: string,
  port: number,
  routes: Routes,
  log: Logger,
): Promise<RunningHttpServer> {
  const server: Server = createServer((req, res) => {
    void respond(routes, req, res, log);
  });
  // Probes are tiny; a client that trickles its request is not a probe.
  server.headersTimeout = HTTP_HEADERS_TIMEOUT_MS;
  server.requestTimeout = HTTP_REQUEST_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    // "" means all interfaces, as in Go; Node wants undefined for that.
    server.listen(port, host || undefined, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (err) => log.error({ err }, "http server error"));
  return {
    address: server.address() as AddressInfo,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Kubelet and Prometheus keep connections alive; do not wait for them to go idle.
        server.closeAllConnections();
      }),
  };
}

export const metricsRoute = (registry: Registry) => async (): Promise<HttpReply> => ({
  status: 200,
  body: await registry.metrics(),
  contentType: registry.contentType,
});

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
