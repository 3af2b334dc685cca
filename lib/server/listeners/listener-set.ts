/**
 * What every listener of a gateway shares, and what shutdown must reach: the net and TLS servers,
 * their sockets, our gRPC servers and the HTTP/2 peer watches. Listener builders register here;
 * the gateway drains and closes them all at once.
 */
import type { Server, Socket } from "node:net";
import type { TLSSocket, Server as TlsServer } from "node:tls";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { GrpcServer, type GrpcServerOptions } from "../../transport/grpc/server.js";
import { HandshakeGate, type HandshakeLimits, sourceKey } from "../../transport/handshake-gate.js";
import { Http2PeerWatch } from "../../transport/http2-peer-watch.js";
import { closeServer } from "../../transport/listen.js";
import { tcpPeerGone, tlsTransport } from "../../transport/node-internals.js";
import type { RefusalThrottle } from "../../transport/refusal-throttle.js";
import { SocketTracker } from "../../transport/socket-tracker.js";
import { PEER_WATCH_STALL_MS, PEER_WATCH_TICK_MS } from "../durations.js";

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
      this.sockets.add(socket);
    });
  }

  /**
   * Registers a TLS listener: bounded handshakes in progress (handshake-gate.ts), and a
   * handshake that fails or times out closes its socket.
   */
  trackTls(server: TlsServer, name: string, limits: HandshakeLimits): void {
    this.track(server);
    const handshakes = this.metrics.tlsHandshakes.labels({ listener: name });
    const throttle = this.throttle?.enabled ? this.throttle : undefined;
    const gate = new HandshakeGate(limits, {
      refused: (reason) => {
        this.metrics.rejectedConnections.inc({ listener: name, reason });
        this.log.debug(
          { listener: name, reason },
          reason === "source_throttled"
            ? "refused a connection: its source keeps being refused"
            : reason === "handshake_rate"
              ? "refused a connection: over --max-tls-handshake-rate"
              : "refused a connection: too many TLS handshakes in progress",
        );
      },
      admitSource: throttle && ((source) => throttle.admit(source)),
      changed: (inProgress) => handshakes.set(inProgress),
    });
    gate.guard(server);
    this.gates.push(gate);
    server.on("tlsClientError", (err: Error, socket: TLSSocket) => {
      // Node reports a failed or timed-out handshake here and then leaves the socket open for
      // as long as the client likes: close it, or half-open handshakes pile up without bound.
      socket.destroy();
      // A connection the gate refused was counted there, under its reason: not again as "tls".
      if (gate.refusedHere(tlsTransport(socket))) return;
      this.metrics.rejectedConnections.inc({ listener: name, reason: "tls" });
      // A failed handshake cost as much as a good one: a source failing over and over (a
      // certificate we refuse, in a loop) is throttled as a refused caller is.
      if (socket.remoteAddress !== undefined) this.throttle?.refused(sourceKey(socket.remoteAddress));
      this.log.debug({ listener: name, err: err.message }, "TLS handshake failed");
    });
  }

  /** TLS handshakes under way on every listener (shutdown waits for them). */
  get handshakesInProgress(): number {
    return this.gates.reduce((n, g) => n + g.inProgress, 0);
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
