/**
 * HTTP CONNECT through the gateway with Node's own http/https clients, then HTTP over the tunnel.
 */
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { TestPki } from "./pki.js";

/**
 * What a Node CONNECT caller over TLS reads when its tunnel breaks: the failing record the gateway
 * sends after the last byte (lib/transport/break-socket.ts), or a reset once it has read that
 * (or, past the linger, without it). Never a clean end.
 */
export const BROKEN_TUNNEL_ERRORS: readonly string[] = ["ERR_SSL_BAD_RECORD_TYPE", "ECONNRESET"];

export type ProxyTarget =
  | { kind: "tls"; host: string; port: number; pki: TestPki; clientCert?: boolean }
  | { kind: "uds"; path: string };

export interface ConnectResult {
  status: number;
  headers: IncomingMessage["headers"];
  socket: Socket;
  head: Buffer;
}

export function connectThrough(proxy: ProxyTarget, target: string): Promise<ConnectResult> {
  return new Promise((resolve, reject) => {
    const common = { method: "CONNECT", path: target, headers: { host: "127.0.0.1" }, agent: false as const };
    const req =
      proxy.kind === "uds"
        ? httpRequest({ ...common, socketPath: proxy.path })
        : httpsRequest({
            ...common,
            host: proxy.host,
            port: proxy.port,
            servername: "localhost",
            ca: proxy.pki.ca.certPem,
            ...(proxy.clientCert === false
              ? {}
              : { cert: proxy.pki.frontend.certPem, key: proxy.pki.frontend.keyPem }),
          });
    req.once("connect", (res, socket, head) =>
      resolve({ status: res.statusCode ?? 0, headers: res.headers, socket, head }),
    );
    // Non-200 answers to CONNECT arrive as a normal response.
    req.once("response", (res) => {
      res.resume();
      resolve({
        status: res.statusCode ?? 0,
        headers: res.headers,
        socket: res.socket,
        head: Buffer.alloc(0),
      });
    });
    req.once("error", reject);
    req.end();
  });
}

/** One HTTP request over an already-established tunnel. */
export function httpOver(
  socket: Duplex,
  path: string,
  opts: { method?: string; body?: NodeJS.ReadableStream } = {},
): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({
      createConnection: () => socket as Socket,
      path,
      method: opts.method ?? "GET",
      headers: { host: "backend", connection: "close" },
    });
    req.once("response", resolve);
    req.once("error", reject);
    if (opts.body) opts.body.pipe(req);
    else req.end();
  });
}

export async function bodyText(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
}
