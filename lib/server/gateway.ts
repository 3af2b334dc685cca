/**
 * One gateway instance: wires listeners, authentication, the agent registry and the frontends
 * together. Everything here is composition; behaviour lives in the pieces it wires.
 */

import { readFileSync } from "node:fs";
import type { AddressInfo, Server, Socket } from "node:net";
import { createServer as createNetServer } from "node:net";
import { createServer as createTlsServer, type TLSSocket, type Server as TlsServer } from "node:tls";
import type { ServerOptions } from "../config/server-options.js";
import { ConfigError, ShuttingDownError } from "../errors.js";
import { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import { TUNNEL_ALPN } from "../proto/tunnel-frames.js";
import {
  acceptFrontendConnection,
  type FrontendConnectionOptions,
} from "../transport/frontend-connection.js";
import { GrpcServer, type GrpcServerOptions } from "../transport/grpc-server.js";
import { AGENT_SERVICE, PROXY_SERVICE } from "../transport/grpc-services.js";
import { HandshakeGate } from "../transport/handshake-gate.js";
import { metricsRoute, type RunningHttpServer, startHttpServer } from "../transport/http-endpoints.js";
import { Http2PeerWatch, tcpPeerGone } from "../transport/http2-peer-watch.js";
import { closeServer, listenTcp, listenUnix } from "../transport/listen.js";
import { SocketTracker } from "../transport/socket-tracker.js";
import { serverTlsSettings } from "../transport/tls-files.js";
import type { AgentAdmissionDeps } from "./agent-admission.js";
import { DEFAULT_TENANT, hashToken, parseTokenFile, staticAgentAuthenticator } from "./agent-auth.js";
import { createAgentConnectHandler } from "./agent-connect-handler.js";
import { createAgentTunnelHandler } from "./agent-tunnel-handler.js";
import { BackendRegistry } from "./backend-registry.js";
import { serveConnect } from "./connect-frontend.js";
import { type Dialer, GrpcFrontendSession } from "./grpc-frontend.js";
import { chooserFor } from "./proxy-strategies.js";

/** Keepalive of callers: how long to wait for a ping ack before declaring the peer dead. */
export const KEEPALIVE_TIMEOUT_MS = 20_000;
/**
 * How long a probe of an agent may go unanswered before the agent counts as unresponsive (no new
 * dials; lib/server/agent-liveness.ts). A live agent answers a PING within milliseconds; two
 * seconds allow for a GC pause or a loaded node without letting dials queue on a frozen agent.
 */
export const AGENT_PROBE_ANSWER_MS = 2_000;
/**
 * Dead HTTP/2 peers (lib/transport/http2-peer-watch.ts): sessions silent for half a second after
 * our writes are checked; a reset socket is closed at once, a live-looking one gets a PING with
 * `answerMs` to answer (the agent port uses the agent liveness timeout instead, so a frozen agent
 * keeps its tunnels as long as that documented bound promises).
 */
const PEER_WATCH = { tickMs: 500, stallMs: 500 } as const;
/** While shutting down, how often to check whether open tunnels have finished. */
const DRAIN_POLL_MS = 100;

export interface GatewayAddresses {
  frontend: AddressInfo | null;
  uds: string | null;
  agent: AddressInfo;
  admin: AddressInfo;
  health: AddressInfo;
}

export interface GatewayDeps {
  log: Logger;
  metrics?: ServerMetrics;
}

/** Largest gRPC message accepted from a peer (upstream's servers take 16 MiB DATA packets too). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
const PROXY_PATH = PROXY_SERVICE.proxy!.path;
const CONNECT_PATH = AGENT_SERVICE.connect!.path;

function loadTokenHashes(opts: ServerOptions): Buffer[] {
  const tokens = [...opts.agent.tokens];
  if (opts.agent.tokenFile) {
    try {
      tokens.push(...parseTokenFile(readFileSync(opts.agent.tokenFile, "utf8")));
    } catch (err) {
      throw new ConfigError(`--agent-token-file: ${(err as Error).message}`, { cause: err });
    }
    if (tokens.length === 0)
      throw new ConfigError(`--agent-token-file ${opts.agent.tokenFile} has no tokens`);
  }
  return tokens.map(hashToken);
}

export class Gateway {
  readonly metrics: ServerMetrics;
  readonly registry: BackendRegistry;
  private accepting = true;
  private readonly frontendSessions = new Set<GrpcFrontendSession>();
  private readonly sockets = new SocketTracker();
  private readonly listeners: Server[] = [];
  private readonly grpcServers: GrpcServer[] = [];
  private readonly peerWatches: Http2PeerWatch[] = [];
  private readonly httpServers: RunningHttpServer[] = [];
  private closed: Promise<void> | null = null;
  addresses!: GatewayAddresses;

  private constructor(
    private readonly opts: ServerOptions,
    private readonly log: Logger,
    metrics: ServerMetrics | undefined,
  ) {
    this.metrics = metrics ?? new ServerMetrics();
    this.registry = new BackendRegistry(chooserFor(opts.proxyStrategies));
  }

  static async start(opts: ServerOptions, deps: GatewayDeps): Promise<Gateway> {
    const gw = new Gateway(opts, deps.log, deps.metrics);
    try {
      await gw.listen();
    } catch (err) {
      await gw.close();
      throw err;
    }
    deps.log.info({ serverId: opts.serverId, addresses: gw.addresses }, "gateway listening");
    if (gw.addresses.frontend && opts.frontend.anonymousCallers) {
      // Asked for by a flag (server-options.ts refuses it otherwise); still worth a line at every
      // start, since a tunnel reaches everything the agents can.
      deps.log.warn(
        { frontend: gw.addresses.frontend, tls: opts.frontend.tls !== null },
        "the TCP frontend accepts anonymous callers: anyone who can reach it can open tunnels into the cluster",
      );
    }
    return gw;
  }

  /** Ready to serve dials: at least one agent connected and answering, and not shutting down. */
  get ready(): boolean {
    return this.accepting && this.registry.responsiveCount > 0;
  }

  /** Dials and connections currently carried, across all agents. */
  get activeTunnels(): number {
    let n = 0;
    for (const s of this.registry.all()) n += s.load;
    return n;
  }

  private async listen(): Promise<void> {
    const { opts, log } = this;
    const tokenHashes = loadTokenHashes(opts);

    // Agents: TLS (optionally mTLS), then AgentService over gRPC (upstream agents, and ours
    // talking to an upstream server) or over kgw-tunnel/1 (ours), chosen by ALPN.
    const liveness = {
      probeIntervalMs: opts.agent.probeIntervalMs,
      answerTimeoutMs: Math.min(AGENT_PROBE_ANSWER_MS, opts.agent.probeIntervalMs),
      deadAfterMs: opts.agent.livenessTimeoutMs,
    };
    const admission: AgentAdmissionDeps = {
      serverId: opts.serverId,
      serverCount: opts.serverCount,
      dialTimeoutMs: opts.backendDialTimeoutMs,
      liveness,
      authenticate: staticAgentAuthenticator({ tokenHashes, acceptCertificates: opts.agent.tls.ca !== "" }),
      registry: this.registry,
      accepting: () => this.accepting,
      log: log.child({ component: "agent-listener" }),
      metrics: this.metrics,
    };
    // A frozen agent keeps its tunnels for the liveness timeout: no transport check may end
    // them sooner.
    const agentAnswerMs = Math.max(KEEPALIVE_TIMEOUT_MS, opts.agent.livenessTimeoutMs);
    const agentWatch = this.peerWatch("agent", agentAnswerMs);
    const agentGrpc = this.grpcServer({
      methods: { [CONNECT_PATH]: createAgentConnectHandler(admission) },
      maxMessageBytes: MAX_MESSAGE_BYTES,
      keepaliveMs: opts.agent.keepaliveMs,
      keepaliveTimeoutMs: agentAnswerMs,
      firstCallTimeoutMs: opts.handshakes.timeoutMs,
      onSession: (session, transport) => agentWatch.watch(session, transport),
      log: log.child({ component: "agent-listener", transport: "grpc" }),
    });
    const acceptTunnel = createAgentTunnelHandler(admission, {
      handshakeTimeoutMs: opts.handshakes.timeoutMs,
      keepaliveMs: opts.agent.keepaliveMs,
      keepaliveTimeoutMs: agentAnswerMs,
    });
    const agentServer = createTlsServer({
      ...serverTlsSettings(opts.agent.tls, opts.tlsMinVersion, false, "cluster"),
      // Server preference decides: our agents offer both and get the tunnel, upstream agents
      // offer only h2.
      ALPNProtocols: [TUNNEL_ALPN, "h2"],
      handshakeTimeout: opts.handshakes.timeoutMs,
    });
    agentServer.on("secureConnection", (socket: TLSSocket) => {
      if (socket.alpnProtocol === TUNNEL_ALPN) void acceptTunnel(socket);
      else agentGrpc.accept(socket);
    });
    this.track(agentServer, "agent", true);

    // Frontend: gRPC ProxyService and HTTP CONNECT on the same listeners.
    // One child logger per kind, not per connection: each costs a few hundred bytes.
    const frontendLog = log.child({ component: "frontend" });
    const connectLog = log.child({ component: "connect" });
    const dialer: Dialer = (req, end) => {
      // Streams and sockets accepted before shutdown began may still ask; they get a clear no.
      if (!this.accepting) throw new ShuttingDownError();
      return this.registry.dial(DEFAULT_TENANT, req, end);
    };
    const frontendWatch = this.peerWatch("frontend", KEEPALIVE_TIMEOUT_MS);
    const frontendGrpc = this.grpcServer({
      methods: {
        [PROXY_PATH]: (request) => {
          const call = request.accept();
          const session = new GrpcFrontendSession(call, dialer, frontendLog, this.metrics);
          this.frontendSessions.add(session);
          this.metrics.grpcConnections.inc({ service_method: "Proxy" });
          call.once("close", () => {
            this.frontendSessions.delete(session);
            this.metrics.grpcConnections.dec({ service_method: "Proxy" });
          });
        },
      },
      maxMessageBytes: MAX_MESSAGE_BYTES,
      keepaliveMs: opts.frontend.keepaliveMs,
      keepaliveTimeoutMs: KEEPALIVE_TIMEOUT_MS,
      // Callers on TLS showed a certificate already; on the Unix socket, the file's permissions.
      firstCallTimeoutMs: 0,
      onSession: (session, transport) => frontendWatch.watch(session, transport),
      log: frontendLog,
    });
    const connectionOptions = (listener: string): FrontendConnectionOptions => ({
      listener,
      maxHeaderBytes: opts.frontend.maxHeaderBytes,
      headerTimeoutMs: opts.frontend.headerTimeoutMs,
      log: log.child({ component: "frontend", listener }),
      metrics: this.metrics,
      onGrpc: (c) => frontendGrpc.accept(c),
      onConnect: (socket, request, rest) => {
        serveConnect({
          socket,
          address: request.target,
          rest,
          dialer,
          log: connectLog,
          metrics: this.metrics,
        });
      },
    });

    let frontendAddress: AddressInfo | null = null;
    if (opts.frontend.port !== null) {
      const tcpOptions = connectionOptions("tcp");
      const frontendServer = opts.frontend.tls
        ? createTlsServer({
            ...serverTlsSettings(opts.frontend.tls, opts.tlsMinVersion, true, "server"),
            ALPNProtocols: ["h2", "http/1.1"],
            handshakeTimeout: opts.handshakes.timeoutMs,
          }).on("secureConnection", (s) => acceptFrontendConnection(s, tcpOptions))
        : createNetServer((s) => acceptFrontendConnection(s, tcpOptions));
      this.track(frontendServer, "frontend", opts.frontend.tls !== null);
      frontendAddress = await listenTcp(frontendServer, opts.frontend.port, opts.frontend.host);
    }
    let udsPath: string | null = null;
    if (opts.frontend.udsPath) {
      const udsOptions = connectionOptions("uds");
      const udsServer = createNetServer((s) => acceptFrontendConnection(s, udsOptions));
      this.track(udsServer, "uds", false);
      udsPath = await listenUnix(udsServer, opts.frontend.udsPath, opts.frontend.deleteExistingUds);
    }

    const httpLog = log.child({ component: "http" });
    const health = await startHttpServer(
      opts.health.host,
      opts.health.port,
      {
        "/healthz": () => ({ status: 200, body: "ok\n" }),
        "/readyz": () =>
          this.ready
            ? { status: 200, body: "ok\n" }
            : { status: 503, body: this.accepting ? "no agent connected\n" : "shutting down\n" },
      },
      httpLog,
    );
    this.httpServers.push(health);
    const admin = await startHttpServer(
      opts.admin.host,
      opts.admin.port,
      { "/metrics": metricsRoute(this.metrics.registry) },
      httpLog,
    );
    this.httpServers.push(admin);

    this.addresses = {
      frontend: frontendAddress,
      uds: udsPath,
      agent: await listenTcp(agentServer, opts.agent.port, opts.agent.host),
      health: health.address,
      admin: admin.address,
    };
  }

  private grpcServer(options: GrpcServerOptions): GrpcServer {
    const server = new GrpcServer(options);
    this.grpcServers.push(server);
    return server;
  }

  /** A watch for the HTTP/2 sessions of `listener` (lib/transport/http2-peer-watch.ts). */
  private peerWatch(listener: string, answerMs: number): Http2PeerWatch {
    const log = this.log.child({ component: "http2-peer-watch", listener });
    const watch = new Http2PeerWatch({
      ...PEER_WATCH,
      answerMs,
      disconnected: tcpPeerGone,
      onClosed: (reason) => {
        this.metrics.deadHttp2Peers.inc({ listener, reason });
        log.warn({ reason }, "closed an HTTP/2 connection whose peer is gone");
      },
    });
    this.peerWatches.push(watch);
    return watch;
  }

  private track(server: Server, name: string, tls: boolean): void {
    this.listeners.push(server);
    server.on("connection", (socket: Socket) => {
      // Tunnels carry interactive traffic (exec, port-forward) and small protocol answers
      // ("200 Connection established", DIAL_RSP): Nagle's delay against the peer's delayed ACK
      // added ~40 ms to every CONNECT dial.
      socket.setNoDelay(true);
      this.sockets.add(socket);
    });
    if (!tls) return;
    const handshakes = this.metrics.tlsHandshakes.labels({ listener: name });
    new HandshakeGate(this.opts.handshakes, {
      refused: (reason) => {
        this.metrics.rejectedConnections.inc({ listener: name, reason });
        this.log.debug(
          { listener: name, reason },
          "refused a connection: too many TLS handshakes in progress",
        );
      },
      changed: (inProgress) => handshakes.set(inProgress),
    }).guard(server as TlsServer);
    server.on("tlsClientError", (err: Error, socket: TLSSocket) => {
      // Node reports a failed or timed-out handshake here and then leaves the socket open for
      // as long as the client likes: close it, or half-open handshakes pile up without bound.
      socket.destroy();
      this.metrics.rejectedConnections.inc({ listener: name, reason: "tls" });
      this.log.debug({ listener: name, err: err.message }, "TLS handshake failed");
    });
  }

  /**
   * Graceful stop: refuse new work, let open tunnels finish within --graceful-shutdown-timeout,
   * then close everything. Agents see their stream end and reconnect to another instance.
   */
  async shutdown(): Promise<void> {
    if (this.accepting) {
      this.accepting = false;
      this.log.info({ activeTunnels: this.activeTunnels }, "shutting down: waiting for open tunnels");
      for (const l of this.listeners) if (l.listening) l.close();
      for (const g of this.grpcServers) g.drain();
      const deadline = Date.now() + this.opts.gracefulShutdownMs;
      while (this.activeTunnels > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
      }
    }
    await this.close();
  }

  /** Immediate stop: every tunnel, stream and socket is closed. Idempotent. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.accepting = false;
      for (const session of [...this.registry.all()]) session.close();
      for (const session of this.frontendSessions) session.abort();
      for (const g of this.grpcServers) g.close();
      for (const w of this.peerWatches) w.close();
      this.sockets.destroyAll();
      await Promise.all([...this.listeners.map(closeServer), ...this.httpServers.map((h) => h.close())]);
      this.log.info("gateway stopped");
    })();
    return this.closed;
  }
}
