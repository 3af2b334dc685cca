/**
 * Our gRPC server on Node's HTTP/2 directly (why not grpc-js: see call-stream.ts): the
 * frontend's ProxyService and the agent port's AgentService each run on one. It serves whatever
 * bidirectional methods it is given, on connections handed to `accept` (TLS sockets negotiated
 * to h2, and sniffed plaintext or Unix-socket connections), with what a gRPC server owes its
 * callers:
 *
 * - calls other than POST get 405, content types other than application/grpc 415, unknown
 *   methods UNIMPLEMENTED, a `grpc-encoding` other than identity UNIMPLEMENTED (we announce
 *   identity only), and a malformed `grpc-timeout` INTERNAL, each in a trailers-only answer
 *   that closes that one stream;
 * - `grpc-timeout` is a deadline: the call ends with DEADLINE_EXCEEDED when it runs out;
 * - keepalive: a PING every `keepaliveMs`; no answer in `keepaliveTimeoutMs` closes the
 *   connection (by its socket: see ../http2-peer-watch.ts for why not `session.destroy()`);
 * - WAN-sized flow-control windows (windows.ts);
 * - a connection that has opened no call within `firstCallTimeoutMs` is closed: before its first
 *   call a peer has shown no credential (on the agent port, where TLS client certificates are
 *   optional, an h2 session is otherwise free to sit idle for ever);
 * - `drain` sends GOAWAY (calls in flight finish, new ones go elsewhere); `close` ends all.
 *
 * Whatever it refuses it logs through one refusal log (lib/observability/refusal-log.ts): a
 * budget of lines a second, paths as route shapes (a path may be an install link), no header
 * value; the caller is told the details.
 */
import {
  createServer,
  type Http2Server,
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from "node:http2";
import type { Duplex } from "node:stream";
import { DeadlineExceededError, GrpcCode } from "../../errors.js";
import type { Logger } from "../../observability/logger.js";
import { type RefusalLog, refusalLog } from "../../observability/refusal-log.js";
import {
  encodeGrpcMessage,
  MESSAGE_PREFIX_BYTES,
  parseGrpcTimeout,
  writeMessagePrefix,
} from "../../proto/grpc-http2.js";
import type { PeerActivity } from "../http2-peer-watch.js";
import { peerCloseKind } from "../peer-close.js";
import { GRPC_RESPONSE_HEADERS, GrpcCallStream } from "./call-stream.js";
import { keepalive } from "./keepalive.js";
import { HTTP2_CONNECTION_WINDOW_BYTES, HTTP2_STREAM_WINDOW_BYTES } from "./windows.js";

/** One incoming call, before it is answered: the handler accepts it or refuses it. */
export interface GrpcRequest {
  readonly path: string;
  /** Request headers; gRPC metadata is among them, lower-cased. */
  readonly headers: IncomingHttpHeaders;
  /** The connection the call arrived on: a TLSSocket on TLS listeners. */
  readonly transport: Duplex;
  /** Answers with response headers (plus `metadata`) and returns the call's packet stream. */
  accept(metadata?: Readonly<Record<string, readonly string[]>>): GrpcCallStream;
  /**
   * Ends the call at once with `code` and `message` (a trailers-only answer), and `trailers`
   * (metadata beside the status: the refusal's details, lib/server/refusal-details.ts).
   */
  refuse(code: number, message: string, trailers?: Readonly<Record<string, string>>): void;
  /**
   * Answers a unary call: response headers (plus `metadata`), one message, status OK. What the
   * caller sends is read and dropped. For our own methods (the fleet's status call), never for
   * the protocol's streams.
   */
  reply(message: Uint8Array, metadata?: Readonly<Record<string, readonly string[]>>): void;
}

export type GrpcMethodHandler = (request: GrpcRequest) => void;

export interface GrpcServerOptions {
  /** Handlers by path ("/ProxyService/Proxy"). */
  methods: Record<string, GrpcMethodHandler>;
  maxMessageBytes: number;
  /** Interval of keepalive PINGs; 0 disables them. */
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
  /** A connection with no call this long after it was accepted is closed; 0 disables. */
  firstCallTimeoutMs: number;
  /**
   * Told of every new session and the transport it runs on (the peer watch). What it returns is
   * told of every write and read the server makes on that session (http2-peer-watch.ts), so that
   * an idle session costs nothing.
   */
  // biome-ignore lint/suspicious/noConfusingVoidType: a listener that only looks returns nothing
  onSession?: (session: ServerHttp2Session, transport: Duplex) => PeerActivity | void;
  log: Logger;
}

const GRPC_CONTENT_TYPE = /^application\/grpc([+;]|$)/;

/** Longest delay a Node timer takes (about 24.8 days); longer ones would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Calls `fn` after `ms`, however long (grpc-timeout allows years); returns a cancel function. */
function afterMs(ms: number, fn: () => void): () => void {
  const due = Date.now() + ms;
  let timer: NodeJS.Timeout;
  const arm = () => {
    const left = due - Date.now();
    timer = left > MAX_TIMER_MS ? setTimeout(arm, MAX_TIMER_MS) : setTimeout(fn, Math.max(0, left));
  };
  arm();
  return () => clearTimeout(timer);
}

export class GrpcServer {
  private readonly h2: Http2Server;
  private readonly sessions = new Set<ServerHttp2Session>();
  /** The connection under each session, as handed to `accept` (Node's `session.socket` is a proxy). */
  private readonly transports = new WeakMap<Http2Session, Duplex>();
  /** What `onSession` returned for each session: told of the server's writes and reads. */
  private readonly activity = new WeakMap<Http2Session, PeerActivity>();
  /** The transport being handed to Node right now (it creates the session synchronously). */
  private accepting: Duplex | null = null;
  private draining = false;
  /** Every line about a refused request or connection: budgeted and redacted. */
  private readonly refusals: RefusalLog;

  constructor(private readonly opts: GrpcServerOptions) {
    this.refusals = refusalLog(opts.log, { knownPaths: new Set(Object.keys(opts.methods)) });
    this.h2 = createServer({
      settings: { initialWindowSize: HTTP2_STREAM_WINDOW_BYTES },
      // Node refuses new streams once a session buffers more than this (10 MB by default); the
      // windows already bound what a caller can send, as grpc-js's servers also assume.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
    });
    this.h2.on("session", (session) => this.onSession(session));
    this.h2.on("stream", (stream, headers) => this.onStream(stream, headers));
  }

  /** Serves HTTP/2 on `transport`, which has already been authenticated (TLS) or sniffed. */
  accept(transport: Duplex): void {
    if (this.draining) {
      transport.destroy();
      return;
    }
    this.accepting = transport;
    try {
      this.h2.emit("connection", transport);
    } finally {
      this.accepting = null;
    }
  }

  get sessionCount(): number {
    return this.sessions.size;
  }

  /** GOAWAY on every session: calls in flight go on, new calls and connections are refused. */
  drain(): void {
    this.draining = true;
    for (const s of this.sessions) {
      s.close();
      this.activity.get(s)?.active();
    }
  }

  /** Ends every session now. */
  close(): void {
    this.draining = true;
    for (const s of this.sessions) s.destroy();
  }

  private onSession(session: ServerHttp2Session): void {
    const transport = this.accepting;
    this.sessions.add(session);
    session.once("close", () => this.sessions.delete(session));
    session.on("error", (err) => {
      const how = peerCloseKind(err);
      if (how) this.opts.log.debug({ how }, "HTTP/2 connection closed by the peer");
      else this.opts.log.debug({ err: err.message }, "HTTP/2 session error");
    });
    session.setLocalWindowSize(HTTP2_CONNECTION_WINDOW_BYTES);
    if (transport) {
      this.transports.set(session, transport);
      this.keepalive(session, transport);
      this.expectFirstCall(session, transport);
      const activity = this.opts.onSession?.(session, transport);
      if (activity) this.activity.set(session, activity);
    }
  }

  private expectFirstCall(session: ServerHttp2Session, transport: Duplex): void {
    const ms = this.opts.firstCallTimeoutMs;
    if (ms <= 0) return;
    const timer = setTimeout(() => {
      this.refusals({ firstCallTimeoutMs: ms }, "closing an HTTP/2 connection that opened no call");
      transport.destroy();
    }, ms).unref();
    const done = () => clearTimeout(timer);
    session.once("stream", done);
    session.once("close", done);
  }

  private keepalive(session: ServerHttp2Session, transport: Duplex): void {
    const { keepaliveMs, keepaliveTimeoutMs } = this.opts;
    if (keepaliveMs <= 0) return;
    keepalive(session, {
      intervalMs: keepaliveMs,
      timeoutMs: keepaliveTimeoutMs,
      onTimeout: () => {
        this.opts.log.info({ keepaliveTimeoutMs }, "closing an HTTP/2 connection: no keepalive answer");
        transport.destroy();
      },
      pingSent: () => this.activity.get(session)?.pingSent(),
    });
  }

  private onStream(stream: ServerHttp2Stream, headers: IncomingHttpHeaders): void {
    const activity = stream.session ? this.activity.get(stream.session) : undefined;
    stream.on("error", (err) => {
      // A peer that left is logged once, by its session.
      if (!peerCloseKind(err)) this.opts.log.debug({ err: err.message }, "HTTP/2 stream error");
    });
    const path = headers[":path"] ?? "";
    if (headers[":method"] !== "POST") {
      this.refuseHttp(stream, 405, path);
      return;
    }
    const contentType = headers["content-type"];
    if (typeof contentType !== "string" || !GRPC_CONTENT_TYPE.test(contentType)) {
      this.refuseHttp(stream, 415, path);
      return;
    }
    const handler = Object.hasOwn(this.opts.methods, path) ? this.opts.methods[path] : undefined;
    if (!handler) {
      this.refuse(stream, path, GrpcCode.UNIMPLEMENTED, `unknown method ${path}`, "unknown method");
      return;
    }
    const encoding = headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") {
      this.refuse(
        stream,
        path,
        GrpcCode.UNIMPLEMENTED,
        `grpc-encoding ${String(encoding)} is not supported`,
        "grpc-encoding not supported",
      );
      return;
    }
    const timeout = headers["grpc-timeout"];
    const deadlineMs = typeof timeout === "string" ? parseGrpcTimeout(timeout) : null;
    if (timeout !== undefined && deadlineMs === null) {
      this.refuse(
        stream,
        path,
        GrpcCode.INTERNAL,
        `malformed grpc-timeout ${String(timeout)}`,
        "malformed grpc-timeout",
      );
      return;
    }
    let answered = false;
    const once = () => {
      if (answered) throw new Error(`the call to ${path} was already answered`);
      answered = true;
    };
    handler({
      path,
      headers,
      transport: this.transportOf(stream),
      accept: (metadata) => {
        once();
        const call = new GrpcCallStream(stream, {
          maxMessageBytes: this.opts.maxMessageBytes,
          metadata,
          activity,
        });
        if (deadlineMs !== null) {
          const cancel = afterMs(deadlineMs, () => call.fail(new DeadlineExceededError(deadlineMs)));
          stream.once("close", cancel);
        }
        return call;
      },
      refuse: (code, message, trailers) => {
        once();
        this.refuse(stream, path, code, message, message, trailers);
      },
      reply: (message, metadata) => {
        once();
        activity?.active();
        stream.resume();
        stream.respond({ ...metadata, ...GRPC_RESPONSE_HEADERS }, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": String(GrpcCode.OK) }));
        const framed = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES + message.byteLength);
        writeMessagePrefix(framed, message.byteLength);
        framed.set(message, MESSAGE_PREFIX_BYTES);
        stream.end(framed);
      },
    });
  }

  private transportOf(stream: ServerHttp2Stream): Duplex {
    const transport = stream.session ? this.transports.get(stream.session) : undefined;
    // Every session is made in `accept`, so this is only reached for a stream whose session has
    // already gone; the call is dead either way.
    return transport ?? (stream as Duplex);
  }

  private refuseHttp(stream: ServerHttp2Stream, status: number, path: string): void {
    this.refusals({ status, path }, "refused a frontend HTTP/2 request that is not gRPC");
    stream.respond({ ":status": status }, { endStream: true });
  }

  /**
   * A trailers-only answer: the status in the response headers, and the stream closed. The
   * caller is told `message`; the log gets `logged`, which quotes no header value.
   */
  private refuse(
    stream: ServerHttp2Stream,
    path: string,
    code: number,
    message: string,
    logged: string,
    trailers: Readonly<Record<string, string>> = {},
  ): void {
    this.refusals({ grpcStatus: code, path, reason: logged }, "refused a gRPC call");
    stream.respond(
      {
        ...trailers,
        ...GRPC_RESPONSE_HEADERS,
        "grpc-status": String(code),
        "grpc-message": encodeGrpcMessage(message),
      },
      { endStream: true },
    );
  }
}
