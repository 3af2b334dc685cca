/**
 * What every listener of a gateway shares, and what shutdown must reach: the net and TLS servers,
 * their sockets, our gRPC servers and the HTTP/2 peer watches. Listener builders register here;
 * the gateway drains and closes them all at once.
 */
import type { Server, Socket } from "node:net";
import type { TLSSocket, Server as TlsServer } from "node:tls";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { openFilesLimit } from "../../transport/descriptor-limit.js";
import { GrpcServer, type GrpcServerOptions } from "../../transport/grpc/server.js";
import {
  HandshakeGate,
  type HandshakeLimits,
  type HandshakeRefusal,
  sourceKey,
} from "../../transport/handshake-gate.js";
import { Http2PeerWatch } from "../../transport/http2-peer-watch.js";
import { closeServer } from "../../transport/listen.js";
import { tcpPeerGone } from "../../transport/node-internals.js";
import type { RefusalThrottle } from "../../transport/refusal-throttle.js";
import { SocketTracker } from "../../transport/socket-tracker.js";
import { CONNECTION_TCP_KEEPALIVE_MS, PEER_WATCH_STALL_MS, PEER_WATCH_TICK_MS } from "../durations.js";

/**
 * The share of the process's open-files limit one listener's waiting connections may hold: a
 * quarter, so that with the agent port and the frontend both full, half the descriptors are
 * still there for tunnels and dials.
 */
const WAITING_SHARE_OF_DESCRIPTORS = 4;

/** The handshake limits of a TLS listener, as the server's options give them. */
export interface TlsListenerLimits {
  timeoutMs: number;
  maxInProgress: number;
  maxPerSource: number;
  maxNewPerSecond: number;
  burst: number;
  maxWaiting: number;
}

export class ListenerSet {
  private readonly servers: Server[] = [];
  private readonly grpcServers: GrpcServer[] = [];
  private readonly watches: Http2PeerWatch[] = [];
  private readonly sockets = new SocketTracker();
  private readonly gates: HandshakeGate[] = [];

  constructor(
    readonly log: Logger,
    private readonly metrics: ServerMetrics,
    /** Sources refused often enough to be refused cheaply (refusal-throttle.ts); shared by all. */
    readonly throttle?: RefusalThrottle,
    /** The process's open-files limit (null: unknown); bounds how many connections wait. */
    private readonly descriptors: number | null = openFilesLimit(),
  ) {}

  grpcServer(options: GrpcServerOptions): GrpcServer {
    const server = new GrpcServer(options);
    this.grpcServers.push(server);
    return server;
  }

  /** A watch for the HTTP/2 sessions of `listener` (lib/transport/http2-peer-watch.ts). */
  peerWatch(listener: string, answerMs: number): Http2PeerWatch {
    const log = this.log.child({ component: "http2-peer-watch", listener });
    const watch = new Http2PeerWatch({
      tickMs: PEER_WATCH_TICK_MS,
      stallMs: PEER_WATCH_STALL_MS,
      answerMs,
      disconnected: tcpPeerGone,
      onClosed: (reason) => {
        this.metrics.deadHttp2Peers.inc({ listener, reason });
        log.warn({ reason }, "closed an HTTP/2 connection whose peer is gone");
      },
    });
    this.watches.push(watch);
    return watch;
  }

  /** Registers a plain listener (TCP or Unix socket). */
  track(server: Server): void {
    this.servers.push(server);
    server.on("connection", (socket: Socket) => {
      // Tunnels carry interactive traffic (exec, port-forward) and small protocol answers
      // ("200 Connection established", DIAL_RSP): Nagle's delay against the peer's delayed ACK
      // added ~40 ms to every CONNECT dial.
      socket.setNoDelay(true);
      // Agents' connections can stay silent longer than a load balancer remembers a flow
      // (durations.ts): kernel keepalive keeps them known without waking the process.
      socket.setKeepAlive(true, CONNECTION_TCP_KEEPALIVE_MS);
      this.sockets.add(socket);
    });
  }

  /**
   * Registers a TLS listener: bounded handshakes in progress, the rest waiting their turn
   * (handshake-gate.ts), and a handshake that fails or times out closes its socket.
   */
  trackTls(server: TlsServer, name: string, opts: TlsListenerLimits): void {
    const handshakes = this.metrics.tlsHandshakes.labels({ listener: name });
    const waiting = this.metrics.tlsHandshakesWaiting.labels({ listener: name });
    const throttle = this.throttle?.enabled ? this.throttle : undefined;
    const maxWaiting =
      this.descriptors === null
        ? opts.maxWaiting
        : Math.min(opts.maxWaiting, Math.floor(this.descriptors / WAITING_SHARE_OF_DESCRIPTORS));
    if (maxWaiting < opts.maxWaiting) {
      this.log.warn(
        { listener: name, maxWaiting, configured: opts.maxWaiting, openFilesLimit: this.descriptors },
        "fewer TLS connections may wait than --max-tls-handshakes-waiting: the open-files limit is low",
      );
    }
    const limits: HandshakeLimits = { ...opts, maxWaiting, waitMs: opts.timeoutMs };
    const gate = new HandshakeGate(limits, {
      refused: (reason) => {
        this.metrics.rejectedConnections.inc({ listener: name, reason });
        this.log.debug({ listener: name, reason }, REFUSAL_TEXT[reason]);
      },
      admitSource: throttle && ((source) => throttle.admit(source)),
      changed: (inProgress) => handshakes.set(inProgress),
      waiting: (n) => waiting.set(n),
    });
    // Before any other connection listener: the gate takes the TLS server's own (its handshake
    // starts when the connection's turn comes); those added after run at accept.
    gate.guard(server);
    this.track(server);
    this.gates.push(gate);
    server.on("tlsClientError", (err: Error, socket: TLSSocket) => {
      // Node reports a failed or timed-out handshake here and then leaves the socket open for
      // as long as the client likes: close it, or half-open handshakes pile up without bound.
      socket.destroy();
      this.metrics.rejectedConnections.inc({ listener: name, reason: "tls" });
      // A failed handshake cost as much as a good one: a source failing over and over (a
      // certificate we refuse, in a loop) is throttled as a refused caller is.
      if (socket.remoteAddress !== undefined) this.throttle?.refused(sourceKey(socket.remoteAddress));
      this.log.debug({ listener: name, err: err.message }, "TLS handshake failed");
    });
  }

  /**
   * TLS handshakes under way on every listener, and connections waiting for theirs to start:
   * accepted before the listeners closed, they are served too (shutdown waits for them).
   */
  get handshakesInProgress(): number {
    return this.gates.reduce((n, g) => n + g.inProgress + g.waiting, 0);
  }

  /** Stop accepting: listeners close, gRPC sessions get GOAWAY; open connections go on. */
  drain(): void {
    for (const s of this.servers) if (s.listening) s.close();
    for (const g of this.grpcServers) g.drain();
  }

  /** Ends every session and socket, and waits for the listeners to close. */
  async close(): Promise<void> {
    for (const g of this.grpcServers) g.close();
    for (const w of this.watches) w.close();
    this.sockets.destroyAll();
    await Promise.all(this.servers.map(closeServer));
  }
}

const REFUSAL_TEXT: Record<HandshakeRefusal, string> = {
  source_throttled: "refused a connection: its source keeps being refused",
  handshake_rate: "refused a connection: over --max-tls-handshake-rate, with nowhere to wait",
  handshakes_in_progress: "refused a connection: too many TLS handshakes in progress, with nowhere to wait",
  handshakes_per_source:
    "refused a connection: too many TLS handshakes from its source, with nowhere to wait",
  handshake_wait: "closed a connection that waited --tls-handshake-timeout for its TLS handshake to start",
};
