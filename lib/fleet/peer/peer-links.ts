/**
 * The client end of the fleet's peer links: what routing calls once it has chosen the instance
 * that owns a tenant's agents. One HTTP/2 connection per peer instance (keyed by its id and
 * address), opened on the first dial and again after a failure; one stream per forwarded dial
 * (peer-dial.ts), so each tunnel has HTTP/2's per-stream flow control to itself and a stalled
 * caller holds back only its own tunnel.
 *
 * A peer whose connection fails (connect or TLS error, connect timeout, GOAWAY, keepalive or
 * dead-peer watch) is marked failing for PEER_FAILURE_BACKOFF_MS: `isHealthy` says false and
 * dials to it fail at once with PeerUnavailableError, so routing tries another owner instead of
 * every dial waiting out the same dead address. Tunnels open on a connection that dies are
 * broken (ConnectionBrokenError), never closed cleanly.
 *
 * mTLS both ways with this instance's peer certificate; the other end must chain to the peer CA
 * and carry kgw://fleet/peer (peer-identity.ts), checked in place of a host name.
 */
import { type ClientHttp2Session, connect as h2Connect } from "node:http2";
import { isIP } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import type { TlsFiles, TlsMinVersion } from "../../config/tls.js";
import { PeerUnavailableError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import type { DialContext } from "../../server/core/dial-context.js";
import { PEER_WATCH_STALL_MS, PEER_WATCH_TICK_MS } from "../../server/timeouts.js";
import { Http2PeerWatch, tcpPeerGone } from "../../transport/http2-peer-watch.js";
import { readPem } from "../../transport/tls-files.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import { PeerCallStream } from "./peer-call-stream.js";
import { PEER_PROXY_PATH, peerContextHeaders } from "./peer-context.js";
import { PeerDial, type PeerDialOutcome } from "./peer-dial.js";
import { checkPeerServerIdentity } from "./peer-identity.js";
import {
  DEFAULT_PEER_DIAL_TIMEOUT_MS,
  PEER_CONNECT_TIMEOUT_MS,
  PEER_CONNECTION_WINDOW_BYTES,
  PEER_FAILURE_BACKOFF_MS,
  PEER_KEEPALIVE_MS,
  PEER_KEEPALIVE_TIMEOUT_MS,
  PEER_MAX_MESSAGE_BYTES,
  PEER_STREAM_HIGH_WATER_BYTES,
  PEER_STREAM_WINDOW_BYTES,
  PEER_WATCH_ANSWER_MS,
} from "./peer-timeouts.js";

/** Another instance of the fleet, as the registry names it. */
export interface PeerInstance {
  /** Its --server-id. */
  readonly id: string;
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

export interface PeerLinksOptions {
  /** This instance's --server-id, sent as the origin of every forwarded dial. */
  instanceId: string;
  tls: PeerTlsMaterial;
  log: Logger;
  metrics?: ServerMetrics;
  /** How long a forwarded dial waits for the owner's answer (DEFAULT_PEER_DIAL_TIMEOUT_MS). */
  dialTimeoutMs?: number;
  /** For tests: shorter durations than peer-timeouts.ts. */
  timings?: Partial<PeerTimings>;
}

export interface PeerTimings {
  connectTimeoutMs: number;
  failureBackoffMs: number;
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
}

/** Reads the PEM files of --peer-cert, --peer-key and --peer-ca-cert (at start: errors are config). */
export function readPeerTls(files: TlsFiles, minVersion?: TlsMinVersion): PeerTlsMaterial {
  return {
    cert: readPem(files.cert, "--peer-cert"),
    key: readPem(files.key, "--peer-key"),
    ca: readPem(files.ca, "--peer-ca-cert"),
    ...(minVersion ? { minVersion } : {}),
  };
}

export class PeerLinks {
  private readonly links = new Map<string, PeerLink>();
  private readonly watch: Http2PeerWatch;
  private readonly timings: PeerTimings;
  private readonly log: Logger;
  private closed = false;

  constructor(private readonly opts: PeerLinksOptions) {
    this.log = opts.log.child({ component: "peer-links" });
    this.timings = {
      connectTimeoutMs: PEER_CONNECT_TIMEOUT_MS,
      failureBackoffMs: PEER_FAILURE_BACKOFF_MS,
      keepaliveMs: PEER_KEEPALIVE_MS,
      keepaliveTimeoutMs: PEER_KEEPALIVE_TIMEOUT_MS,
      ...opts.timings,
    };
    this.watch = new Http2PeerWatch({
      tickMs: PEER_WATCH_TICK_MS,
      stallMs: PEER_WATCH_STALL_MS,
      answerMs: Math.min(PEER_WATCH_ANSWER_MS, this.timings.keepaliveTimeoutMs),
      disconnected: tcpPeerGone,
      onClosed: (reason) => {
        opts.metrics?.deadHttp2Peers.inc({ listener: "peer-link", reason });
        this.log.warn({ reason }, "closed a peer link whose peer is gone");
      },
    });
    opts.metrics?.onPeerCollect(() => opts.metrics?.failingPeers.set(this.failingCount()));
  }

  /**
   * Forwards one dial to `peer`, which is to serve it from its own agents, as `ctx`'s caller. The
   * answer comes through `frontend` as from a local agent: established (then data both ways) or
   * dialFailed, with PeerNotHereError (the peer has no agent of the tenant: re-read the owners,
   * retry once) or PeerUnavailableError (the peer could not be reached or is draining: try another
   * owner) among the failures. Throws PeerUnavailableError at once for a peer marked failing.
   */
  dial(peer: PeerInstance, ctx: DialContext, req: DialRequest, frontend: FrontendEnd): DialHandle {
    const link = this.linkFor(peer);
    const failing = this.closed ? "peer links are closed" : link.failing();
    if (failing !== null) {
      this.counted("unavailable");
      throw new PeerUnavailableError(peer.id, failing);
    }
    let session: ClientHttp2Session;
    let stream: ReturnType<ClientHttp2Session["request"]>;
    try {
      session = link.session();
      stream = session.request(
        {
          ":method": "POST",
          ":path": PEER_PROXY_PATH,
          "content-type": "application/grpc",
          te: "trailers",
          ...peerContextHeaders(ctx.caller, ctx.frontend, this.opts.instanceId, ctx.dialId),
        },
        { endStream: false },
      );
    } catch (err) {
      // The session closed under us (GOAWAY just arrived): the next dial opens another.
      link.markFailing(`cannot open a stream: ${(err as Error).message}`);
      this.counted("unavailable");
      throw new PeerUnavailableError(peer.id, (err as Error).message);
    }
    ctx.observer?.forwarded?.(peer.id);
    const call = new PeerCallStream(stream, PEER_MAX_MESSAGE_BYTES, PEER_STREAM_HIGH_WATER_BYTES);
    const dial = new PeerDial(call, frontend, {
      peer: peer.id,
      dialTimeoutMs: this.opts.dialTimeoutMs ?? DEFAULT_PEER_DIAL_TIMEOUT_MS,
      linkLost: () => link.lostReason(session),
      outcome: (outcome) => this.counted(outcome),
      answeredBy: (agentId) => ctx.observer?.routed(agentId, peer.id),
    });
    dial.start(req);
    return dial;
  }

  /** False while `peer` is marked failing (routing should prefer another owner). */
  isHealthy(peer: PeerInstance): boolean {
    return this.links.get(keyOf(peer))?.failing() == null;
  }

  /** Connections open (or opening) now, for tests and metrics. */
  get connectionCount(): number {
    let n = 0;
    for (const link of this.links.values()) if (link.connected) n++;
    return n;
  }

  /** Closes every link: open tunnels on them break. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.links.values()].map((l) => l.close()));
    this.links.clear();
    this.watch.close();
  }

  private linkFor(peer: PeerInstance): PeerLink {
    const key = keyOf(peer);
    let link = this.links.get(key);
    if (!link) {
      link = new PeerLink(peer, this.opts, this.timings, this.watch, this.log.child({ peer: peer.id }));
      this.links.set(key, link);
    }
    return link;
  }

  private failingCount(): number {
    let n = 0;
    for (const link of this.links.values()) if (link.failing() !== null) n++;
    return n;
  }

  private counted(outcome: PeerDialOutcome): void {
    this.opts.metrics?.peerDials.inc({ outcome });
  }
}

function keyOf(peer: PeerInstance): string {
  return `${peer.id}@${peer.host}:${peer.port}`;
}

/** The connection to one peer instance, made again after it fails. */
class PeerLink {
  private current: ClientHttp2Session | null = null;
  private socket: TLSSocket | null = null;
  private failingUntil = 0;
  private failReason = "";
  /** Why each session ended (or is ending), for the errors of the dials it carried. */
  private readonly lost = new WeakMap<ClientHttp2Session, string>();
  private closing: Promise<void> | null = null;

  constructor(
    private readonly peer: PeerInstance,
    private readonly opts: PeerLinksOptions,
    private readonly timings: PeerTimings,
    private readonly watch: Http2PeerWatch,
    private readonly log: Logger,
  ) {}

  /** Why the peer is being avoided, or null when it is not. */
  failing(): string | null {
    return Date.now() < this.failingUntil ? this.failReason : null;
  }

  get connected(): boolean {
    return this.current !== null;
  }

  markFailing(reason: string): void {
    if (this.failing() === null) {
      this.log.warn(
        { reason, backoffMs: this.timings.failureBackoffMs },
        "peer link failed; avoiding the peer",
      );
    }
    this.failingUntil = Date.now() + this.timings.failureBackoffMs;
    this.failReason = reason;
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

  close(): Promise<void> {
    const s = this.current;
    if (!s) return Promise.resolve();
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
    const { tls } = this.opts;
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
      // per-stream windows already bound what each tunnel holds (peer-timeouts.ts).
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
    });
    this.current = session;
    this.socket = socket;
    const metrics = this.opts.metrics;
    let connected = false;
    const ended = (reason: string) => {
      if (!this.lost.has(session)) this.lost.set(session, reason);
      if (this.current === session) {
        this.current = null;
        this.socket = null;
      }
    };

    const connectTimer = setTimeout(() => {
      ended(`no connection within ${this.timings.connectTimeoutMs}ms`);
      this.markFailing(this.lost.get(session)!);
      socket?.destroy();
      session.destroy();
    }, this.timings.connectTimeoutMs);
    connectTimer.unref();

    session.once("connect", () => {
      clearTimeout(connectTimer);
      connected = true;
      session.setLocalWindowSize(PEER_CONNECTION_WINDOW_BYTES);
      metrics?.peerConnections.inc({ role: "client" });
      this.log.debug({ host, port }, "peer link connected");
      if (socket) this.watch.watch(session, socket);
      this.keepalive(session, socket);
    });
    session.on("error", (err) => {
      ended(err.message);
      // A session refused during its TLS handshake does not always close its socket.
      socket?.destroy();
      // Before the handshake completed: the peer cannot be reached (refused, TLS, identity).
      if (!connected) this.markFailing(err.message);
      else this.log.debug({ err: err.message }, "peer link error");
    });
    session.once("goaway", (code) => {
      // The peer is draining (or gave up on us): streams it accepted finish, no new ones go there.
      ended(`the peer sent GOAWAY (code ${code})`);
      this.markFailing(this.lost.get(session)!);
    });
    session.once("close", () => {
      clearTimeout(connectTimer);
      socket?.destroy();
      if (connected) metrics?.peerConnections.dec({ role: "client" });
      const closedByUs = this.closing !== null;
      ended(connected ? "the peer link closed" : "the connection closed before it was set up");
      if (!closedByUs) this.markFailing(this.lost.get(session)!);
    });
    return session;
  }

  /** A PING every keepaliveMs; no answer within keepaliveTimeoutMs closes the link (grpc-server.ts). */
  private keepalive(session: ClientHttp2Session, socket: TLSSocket | null): void {
    const { keepaliveMs, keepaliveTimeoutMs } = this.timings;
    const timer = setInterval(() => {
      if (session.closed || session.destroyed) return;
      const deadline = setTimeout(() => {
        this.lost.set(session, `no keepalive answer within ${keepaliveTimeoutMs}ms`);
        this.markFailing(this.lost.get(session)!);
        // Not session.destroy(): a stuck session waits for a write that never finishes.
        socket?.destroy();
        session.destroy();
      }, keepaliveTimeoutMs);
      deadline.unref();
      try {
        session.ping((err) => {
          if (!err) clearTimeout(deadline);
        });
      } catch {
        clearTimeout(deadline); // closing already
      }
    }, keepaliveMs);
    timer.unref();
    session.once("close", () => clearInterval(timer));
  }
}
