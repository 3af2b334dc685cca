/**
 * Small HTTP servers for health and admin endpoints (server and agent). GET and HEAD only; no
 * bodies are read; timeouts are short because these ports face probes and scrapers.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import type { Logger } from "../observability/logger.js";

export interface HttpReply {
  status: number;
  body: string;
  contentType?: string;
  /** More response headers (lower-case names); the status page's security headers, a Location. */
  headers?: Readonly<Record<string, string>>;
}

/** What a handler may read of its request: the path (which chose it) and the query string. */
export interface HttpRequestInfo {
  query: URLSearchParams;
  /** The path as sent, without the query: a prefix route reads what follows its prefix. */
  path: string;
}

/**
 * Path → handler. A key ending in "/" is a prefix route: it serves every path under it that no
 * exact key names (`/status/tenants/` serves `/status/tenants/<id>`); "/" is the root only. Handlers are synchronous
 * or return a promise (metrics collection is async).
 */
export type Routes = Record<string, (req: HttpRequestInfo) => HttpReply | Promise<HttpReply>>;

export interface RunningHttpServer {
  address: AddressInfo;
  close(): Promise<void>;
}

const TEXT = "text/plain; charset=utf-8";

/** Probes send a request line and a few headers; slower than this is not a probe. */
export const HTTP_HEADERS_TIMEOUT_MS = 10_000;
/** A whole request (they have no bodies) must arrive within this time. */
export const HTTP_REQUEST_TIMEOUT_MS = 15_000;

async function respond(
  routes: Routes,
  req: IncomingMessage,
  res: ServerResponse,
  log: Logger,
): Promise<void> {
  let reply: HttpReply;
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const route = Object.hasOwn(routes, path) ? routes[path] : prefixRoute(routes, path);
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.setHeader("allow", "GET, HEAD");
    reply = { status: 405, body: "method not allowed\n" };
  } else if (!route) {
    reply = { status: 404, body: "not found\n" };
  } else {
    try {
      reply = await route({ query: new URLSearchParams(q === -1 ? "" : url.slice(q + 1)), path });
    } catch (err) {
      log.error({ err, path }, "http handler failed");
      reply = { status: 500, body: "internal error\n" };
    }
  }
  res.statusCode = reply.status;
  res.setHeader("content-type", reply.contentType ?? TEXT);
  res.setHeader("cache-control", "no-store");
  // Every answer is what its content-type says: no browser may guess HTML out of a text reply.
  res.setHeader("x-content-type-options", "nosniff");
  for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
  res.end(req.method === "HEAD" ? undefined : reply.body);
}

/** The longest prefix route (a key ending in "/") `path` is under, if any. */
function prefixRoute(routes: Routes, path: string): Routes[string] | undefined {
  let best: string | undefined;
  for (const key of Object.keys(routes)) {
    // "/" itself names the root only: as a prefix it would answer every unknown path.
    if (key !== "/" && key.endsWith("/") && path.startsWith(key) && path.length > key.length) {
      if (best === undefined || key.length > best.length) best = key;
    }
  }
  return best === undefined ? undefined : routes[best];
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
