/**
 * The connection to one incarnation of one peer instance (peer-links.ts keeps one per
 * `PeerInstance`), made again after it fails, and the avoidance that follows a failure.
 *
 * A failure (connect or TLS error, connect timeout, GOAWAY, the link closing, no keepalive
 * answer) marks the peer failing for a jittered, bounded backoff (`peerBackoffMs`): the first for
 * about PEER_FAILURE_BACKOFF_BASE_MS, each consecutive one twice as long up to
 * PEER_FAILURE_BACKOFF_MAX_MS; a connection that is set up starts the count again. Every failure
 * is logged with the peer's id and incarnation and counted in kgw_server_peer_link_failures_total.
 *
 * A link is retired (peer-links.ts `prune`) once its peer's lease is gone: new dials cannot use
 * it, the tunnels it carries finish on their own (HTTP/2's graceful close), and that is no failure.
 */
import { type ClientHttp2Session, connect as h2Connect } from "node:http2";
import { isIP } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import type { TlsMinVersion } from "../../config/tls.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import {
  PEER_CONNECTION_WINDOW_BYTES,
  PEER_FAILURE_BACKOFF_JITTER,
  PEER_STREAM_WINDOW_BYTES,
} from "../../server/durations.js";
import { keepalive } from "../../transport/grpc/keepalive.js";
import type { Http2PeerWatch } from "../../transport/http2-peer-watch.js";
import { checkPeerServerIdentity } from "./peer-identity.js";

/** Another instance of the fleet, as the registry names it. */
export interface PeerInstance {
  /** Its --server-id. */
  readonly id: string;
  /**
   * Which process behind that id (its lease's incarnation): a process restarted in place is a
   * new peer, with a link of its own, and inherits nothing of its predecessor's failures.
   * Absent for a peer named outside the registry (tests, a fixed address).
   */
  readonly incarnation?: number;
  /** Where its peer port listens. */
  readonly host: string;
  readonly port: number;
}

/** This instance's peer identity: its certificate and key, and the fleet's peer CA (PEM). */
export interface PeerTlsMaterial {
  cert: string | Buffer;
  key: string | Buffer;
  ca: string | Buffer;
  minVersion?: TlsMinVersion;
}

export interface PeerTimings {
  connectTimeoutMs: number;
  /** How long the first failure avoids the peer (before jitter). */
  failureBackoffBaseMs: number;
  /** The longest a run of failures avoids it (before jitter). */
  failureBackoffMs: number;
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
}

/** What failed, for kgw_server_peer_link_failures_total's `reason`. */
export type PeerLinkFailure = "connect" | "goaway" | "closed" | "keepalive" | "stream";

/**
 * How long a peer is avoided after its `failures`-th consecutive failure (1 for the first): the
 * base doubled per failure up to the cap, drawn from [1 − PEER_FAILURE_BACKOFF_JITTER, 1] of that.
 */
export function peerBackoffMs(
  failures: number,
  timings: Pick<PeerTimings, "failureBackoffBaseMs" | "failureBackoffMs">,
  random: () => number,
): number {
  const cap = timings.failureBackoffMs;
  const base = Math.min(timings.failureBackoffBaseMs, cap);
  // 2^n overflows to Infinity long after it passed any cap; Math.min handles that.
  const ceiling = Math.min(cap, base * 2 ** Math.max(0, failures - 1));
  return Math.round(ceiling * (1 - PEER_FAILURE_BACKOFF_JITTER * random()));
}

export interface PeerLinkDeps {
  tls: PeerTlsMaterial;
  timings: PeerTimings;
  watch: Http2PeerWatch;
  /** Already naming the peer (id, incarnation). */
  log: Logger;
  metrics?: ServerMetrics;
  clock: () => number;
  random: () => number;
}

export class PeerLink {
  private current: ClientHttp2Session | null = null;
  private socket: TLSSocket | null = null;
  private failingUntil = 0;
  private failReason = "";
  private failures = 0;
  /** Why each session ended (or is ending), for the errors of the dials it carried. */
  private readonly lost = new WeakMap<ClientHttp2Session, string>();
  private closing: Promise<void> | null = null;
  private retired = false;

  constructor(
    readonly peer: PeerInstance,
    private readonly deps: PeerLinkDeps,
  ) {}

  /** Why the peer is being avoided, or null when it is not. */
  failing(): string | null {
    if (this.retired) return "its lease is gone";
    return this.deps.clock() < this.failingUntil ? this.failReason : null;
  }

  get connected(): boolean {
    return this.current !== null;
  }

  /** Avoids the peer for the next backoff; logged and counted, each time. */
  markFailing(kind: PeerLinkFailure, reason: string): void {
    if (this.retired) return;
    this.failures++;
    const backoffMs = peerBackoffMs(this.failures, this.deps.timings, this.deps.random);
    this.failingUntil = this.deps.clock() + backoffMs;
    this.failReason = reason;
    this.deps.metrics?.peerLinkFailures.inc({ reason: kind });
    this.deps.log.warn(
      { reason, failure: kind, consecutiveFailures: this.failures, backoffMs },
      "peer link failed; avoiding the peer",
    );
  }

  lostReason(session: ClientHttp2Session): string | null {
    return this.lost.get(session) ?? null;
  }

  /** The live session, or a new one (lazily connected: requests wait for the handshake). */
  session(): ClientHttp2Session {
    const s = this.current;
    if (s && !s.closed && !s.destroyed && !this.lost.has(s)) return s;
    return this.connect();
  }

  /**
   * The peer's lease is gone: no new streams; those open finish on their own, then the
   * connection closes. Not a failure.
   */
  retire(): void {
    if (this.retired) return;
    this.retired = true;
    const s = this.current;
    if (!s) return;
    this.lost.set(s, "the peer's lease is gone");
    this.deps.log.info("retired the peer link: the peer's lease is gone");
    s.close();
  }

  /** Resolves once the connection (if any) has closed. */
  whenClosed(): Promise<void> {
    const s = this.current;
    if (!s || s.destroyed) return Promise.resolve();
    return new Promise((resolve) => s.once("close", () => resolve()));
  }

  /** Closes at once: open tunnels on it break. */
  close(): Promise<void> {
    this.retired = true;
    const s = this.current;
    if (!s || s.destroyed) return Promise.resolve();
    this.lost.set(s, "this instance closed its peer links");
    this.closing ??= new Promise((resolve) => {
      s.once("close", () => resolve());
      this.socket?.destroy();
      s.destroy();
    });
    return this.closing;
  }

  private connect(): ClientHttp2Session {
    const { host, port } = this.peer;
    const { tls, timings, metrics, log } = this.deps;
    let socket = null as TLSSocket | null;
    const session = h2Connect(`https://${isIP(host) === 6 ? `[${host}]` : host}:${port}`, {
      createConnection: () => {
        socket = tlsConnect({
          host,
          port,
          ...(isIP(host) === 0 ? { servername: host } : {}),
          cert: tls.cert,
          key: tls.key,
          ca: tls.ca,
          minVersion: tls.minVersion ?? "TLSv1.2",
          ALPNProtocols: ["h2"],
          checkServerIdentity: checkPeerServerIdentity,
        });
        // Small protocol packets (DIAL_REQ, DIAL_RSP) must not wait for Nagle (listener-set.ts).
        socket.setNoDelay(true);
        return socket;
      },
      settings: { initialWindowSize: PEER_STREAM_WINDOW_BYTES, enablePush: false },
      // Node refuses new streams once a session buffers more than this (10 MB by default); the
      // per-stream windows already bound what each tunnel holds (lib/server/durations.ts).
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
    });
    this.current = session;
    this.socket = socket;
    let connected = false;
    /** A session's failure counts once, whatever else it reports on the way down. */
    let failed = false;
    const ended = (reason: string) => {
      if (!this.lost.has(session)) this.lost.set(session, reason);
      if (this.current === session) {
        this.current = null;
        this.socket = null;
      }
    };
    const fail = (kind: PeerLinkFailure, reason: string) => {
      ended(reason);
      // Closed or retired by this instance: the end was asked for.
      if (failed || this.closing !== null || this.retired) return;
      failed = true;
      this.markFailing(kind, this.lost.get(session)!);
    };

    const connectTimer = setTimeout(() => {
      fail("connect", `no connection within ${timings.connectTimeoutMs}ms`);
      socket?.destroy();
      session.destroy();
    }, timings.connectTimeoutMs);
    connectTimer.unref();

    session.once("connect", () => {
      clearTimeout(connectTimer);
      connected = true;
      this.failures = 0;
      session.setLocalWindowSize(PEER_CONNECTION_WINDOW_BYTES);
      metrics?.peerConnections.inc({ role: "client" });
      log.debug({ host, port }, "peer link connected");
      if (socket) this.deps.watch.watch(session, socket);
      this.keepalive(session, socket, fail);
    });
    session.on("error", (err) => {
      // A session refused during its TLS handshake does not always close its socket.
      socket?.destroy();
      // Before the handshake completed: the peer cannot be reached (refused, TLS, identity).
      // After: the close that follows counts it, with this reason.
      if (!connected) fail("connect", err.message);
      else {
        ended(err.message);
        log.debug({ err: err.message }, "peer link error");
      }
    });
    session.once("goaway", (code) => {
      // The peer is draining (or gave up on us): streams it accepted finish, no new ones go there.
      fail("goaway", `the peer sent GOAWAY (code ${code})`);
    });
    session.once("close", () => {
      clearTimeout(connectTimer);
      socket?.destroy();
      if (connected) metrics?.peerConnections.dec({ role: "client" });
      fail(
        connected ? "closed" : "connect",
        connected ? "the peer link closed" : "the connection closed before it was set up",
      );
    });
    return session;
  }

  /** A PING every keepaliveMs; no answer within keepaliveTimeoutMs closes the link. */
  private keepalive(
    session: ClientHttp2Session,
    socket: TLSSocket | null,
    fail: (kind: PeerLinkFailure, reason: string) => void,
  ): void {
    const { keepaliveMs, keepaliveTimeoutMs } = this.deps.timings;
    keepalive(session, {
      intervalMs: keepaliveMs,
      timeoutMs: keepaliveTimeoutMs,
      onTimeout: () => {
        fail("keepalive", `no keepalive answer within ${keepaliveTimeoutMs}ms`);
        // Not session.destroy() alone: a stuck session waits for a write that never finishes.
        socket?.destroy();
        session.destroy();
      },
    });
  }
}
