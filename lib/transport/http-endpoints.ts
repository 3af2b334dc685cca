/**
 * Tiny HTTP servers for health and admin endpoints. GET only; anything else is 404/405. Timeouts
 * are short because these ports face probes and scrapers, never long-lived clients.
 */
import { createServer, type Server } from "node:http";

export interface EndpointResponse {
  status: number;
  body: string;
  contentType?: string;
}

export type Route = () => EndpointResponse | Promise<EndpointResponse>;

/** Probes and scrapes are small requests; a client slower than this is broken or hostile. */
export const ENDPOINT_REQUEST_TIMEOUT_MS = 10_000;

export function createEndpointServer(routes: Record<string, Route>): Server {
  const server = createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
    if (!route) {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end("method not allowed\n");
      return;
    }
    try {
      const out = await route();
      res.writeHead(out.status, { "content-type": out.contentType ?? "text/plain; charset=utf-8" });
      res.end(req.method === "HEAD" ? undefined : out.body);
    } catch {
      res.writeHead(500, { "content-type": "text/plain" }).end("internal error\n");
    }
  });
  server.headersTimeout = ENDPOINT_REQUEST_TIMEOUT_MS;
  server.requestTimeout = ENDPOINT_REQUEST_TIMEOUT_MS;
  server.keepAliveTimeout = 5_000;
  return server;
}
