/**
 * An HTTP front for clients that speak HTTP, not the backend's own protocol (curl through HTTP
 * CONNECT): the same content pattern, every uploaded byte checked. Runs in its own process
 * (helper-main.ts http-backend), so its cost is never the benchmark process's.
 *  - GET /ping: one byte (PONG): "dial to first byte" for a client that sends a request as soon as
 *    its tunnel is up.
 *  - GET /download?n=N&start=S: N bytes of the pattern from S on.
 *  - PUT /upload?n=N&start=S: the body is checked against the pattern from S on; 200 once all N
 *    bytes arrived equal, 422 naming the first byte that differs (or how many arrived).
 * Every answer says `Connection: close` when the request did, so each dial is a new tunnel.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { PatternCheck, PatternSource } from "./pattern.js";
import { PONG } from "./protocol.js";

/** As the TCP backend: large enough that writes cost little per byte. */
const WRITE_BYTES = 256 * 1024;
const PONG_BODY = Buffer.from([PONG]);

export function createHttpBackend(): Server {
  const server = createServer({ noDelay: true }, serve);
  server.maxConnections = 100_000;
  // Bulk transfers take as long as they take; nothing here is exposed beyond loopback.
  server.requestTimeout = 0;
  return server;
}

function serve(req: IncomingMessage, res: ServerResponse): void {
  const url = new URL(req.url ?? "/", "http://backend");
  const n = Number(url.searchParams.get("n") ?? "0");
  const start = Number(url.searchParams.get("start") ?? "0");
  if (!Number.isSafeInteger(n) || n < 0 || !Number.isSafeInteger(start) || start < 0) {
    answer(res, 400, "n and start must be non-negative integers\n");
    return;
  }
  if (req.method === "GET" && url.pathname === "/ping") {
    res.writeHead(200, { "content-length": 1, "content-type": "application/octet-stream" });
    res.end(PONG_BODY);
  } else if (req.method === "GET" && url.pathname === "/download") {
    res.writeHead(200, { "content-length": n, "content-type": "application/octet-stream" });
    send(res, n, new PatternSource(start));
  } else if (req.method === "PUT" && url.pathname === "/upload") {
    receive(req, res, n, new PatternCheck(start));
  } else {
    answer(res, 404, "no such path\n");
  }
}

function answer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { "content-type": "text/plain", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function send(res: ServerResponse, n: number, source: PatternSource): void {
  let left = n;
  const pump = () => {
    while (left > 0 && !res.destroyed) {
      const len = Math.min(left, WRITE_BYTES);
      left -= len;
      if (!res.write(source.next(len))) {
        res.once("drain", pump);
        return;
      }
    }
    if (left === 0) res.end();
  };
  pump();
}

function receive(req: IncomingMessage, res: ServerResponse, n: number, check: PatternCheck): void {
  let bad = false;
  req.on("data", (chunk: Buffer) => {
    if (!bad && !check.accept(chunk)) bad = true;
  });
  req.on("end", () => {
    if (bad) answer(res, 422, `bytes differ from the pattern at ${check.checked}\n`);
    else if (check.checked !== n) answer(res, 422, `${check.checked} of ${n} bytes arrived\n`);
    else answer(res, 200, `${n}\n`);
  });
}
