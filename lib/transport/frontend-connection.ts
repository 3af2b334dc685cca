/**
 * First contact with a frontend connection: decide gRPC or HTTP CONNECT, parse the CONNECT head
 * within size and time limits, and hand the connection to the right handler. Anything else gets
 * a clear HTTP error and is closed; only that connection is affected.
 */
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import type { TLSSocket } from "node:tls";
import { type GatewayError, HeadersTimeoutError, httpStatusFor, toGatewayError } from "../errors.js";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import type { RefusalLog } from "../observability/refusal-log.js";
import {
  ConnectHeadParser,
  type ConnectRequest,
  formatConnectResponse,
  type GetRequest,
} from "./http-connect-parser.js";
import { peerCloseKind } from "./peer-close.js";
import { PrefixedDuplex } from "./prefixed-duplex.js";
import { sniffProtocol } from "./protocol-sniffer.js";

/** Upper bound on header fields in a CONNECT head; kube-apiserver sends two or three. */
export const MAX_CONNECT_HEADERS = 64;

/** The Allow header of a 405 where GET is served too. */
const GET_TOO = { Allow: "CONNECT, GET" };

export interface FrontendConnectionOptions {
  listener: string;
  maxHeaderBytes: number;
  headerTimeoutMs: number;
  log: Logger;
  /**
   * Where rejected connections are logged: budgeted and redacted (refusal-log.ts). One per
   * listener, shared by its connections, so that the budget holds across a flood of them.
   */
  refusals: RefusalLog;
  metrics: ServerMetrics;
  onGrpc(connection: Duplex): void;
  onConnect(socket: Socket, request: ConnectRequest, rest: Buffer): void;
  /**
   * A GET with an origin-form target (the one-line install on the gateway port). Absent: GET is
   * refused with 405 like every method but CONNECT.
   */
  onGet?(socket: Socket, request: GetRequest, rest: Buffer): void;
}

export function acceptFrontendConnection(socket: Socket | TLSSocket, opts: FrontendConnectionOptions): void {
  if ("alpnProtocol" in socket && socket.alpnProtocol === "h2") {
    opts.onGrpc(socket);
    return;
  }
  const parser = new ConnectHeadParser({
    maxHeaderBytes: opts.maxHeaderBytes,
    maxHeaders: MAX_CONNECT_HEADERS,
    allowGet: opts.onGet !== undefined,
  });
  let head: Buffer = Buffer.alloc(0);
  let sniffing = true;

  const cleanup = () => {
    clearTimeout(timer);
    socket.off("data", onData);
    socket.off("close", cleanup);
  };
  const reject = (err: GatewayError, reason: string) => {
    cleanup();
    opts.metrics.rejectedConnections.inc({ listener: opts.listener, reason });
    // The message may quote the request line or target (a path with a token in it): the
    // refusal log shapes and bounds it.
    opts.refusals(
      { listener: opts.listener, code: err.code, err: err.message },
      "rejected frontend connection",
    );
    socket.on("error", () => {}); // the peer may already be gone; nothing more to tell it
    const status = httpStatusFor(err);
    socket.end(formatConnectResponse(status, undefined, status === 405 && opts.onGet ? GET_TOO : undefined));
    // A client that ignores our answer must not hold the socket open.
    socket.destroySoon();
  };
  const timer = setTimeout(
    () => reject(new HeadersTimeoutError(opts.headerTimeoutMs), "header_timeout"),
    opts.headerTimeoutMs,
  );

  function onData(chunk: Buffer): void {
    if (sniffing) {
      head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      const kind = sniffProtocol(head);
      if (kind === "need-more") return;
      sniffing = false;
      if (kind === "h2") {
        cleanup();
        socket.pause();
        opts.onGrpc(new PrefixedDuplex(socket, head));
        return;
      }
      chunk = head;
    }
    let result: ReturnType<ConnectHeadParser["push"]>;
    try {
      result = parser.push(chunk);
    } catch (err) {
      const failure = toGatewayError(err);
      reject(failure, failure.code);
      return;
    }
    if (result.kind === "incomplete") return;
    cleanup();
    if (result.kind === "get") opts.onGet!(socket, result.request, result.rest);
    else opts.onConnect(socket, result.request, result.rest);
  }

  socket.on("data", onData);
  socket.on("close", cleanup);
  socket.on("error", (err) => {
    if (!peerCloseKind(err))
      opts.log.debug({ err: err.message, listener: opts.listener }, "frontend socket error");
  });
}
