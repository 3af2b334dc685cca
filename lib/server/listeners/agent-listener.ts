/**
 * The agent port: TLS (optionally mTLS), then AgentService over gRPC (upstream agents, and ours
 * talking to an upstream server) or over kgw-tunnel/1 (ours), chosen by ALPN. Both transports
 * share admission (agent-admission.ts) and end in an AgentSession in the registry.
 *
 * Given a CallerFront (tenant mode), the port serves every role, as one port behind a load
 * balancer must: ALPN kgw-tunnel/1 is an agent; h2 is routed by `:path` to AgentService.Connect
 * or ProxyService.Proxy; HTTP/1.1 (or no ALPN, sniffed) is CONNECT, or a GET: a tenant's own
 * `GET /v1/status` (lib/server/status/) and, with the install route on,
 * `GET /v1/install/<token>.yaml` (lib/server/install/). What a peer may do comes from
 * the credential each call or request shows, never from how it arrived.
 */
import { createServer as createTlsServer, type TLSSocket, type Server as TlsServer } from "node:tls";
import type { ServerOptions } from "../../config/server-options.js";
import { TUNNEL_ALPN } from "../../proto/tunnel-frames.js";
import { acceptFrontendConnection } from "../../transport/frontend-connection.js";
import { AGENT_SERVICE } from "../../transport/grpc/services.js";
import { serverTlsSettings } from "../../transport/tls-files.js";
import type { ProbeTurns } from "../core/agent-liveness.js";
import { AGENT_PROBE_ANSWER_MS, KEEPALIVE_TIMEOUT_MS, MAX_MESSAGE_BYTES } from "../durations.js";
import type { GetRoute } from "../status/self-status-route.js";
import type { AgentAdmissionDeps } from "./agent-admission.js";
import { createAgentConnectHandler } from "./agent-connect-handler.js";
import { createAgentTunnelHandler } from "./agent-tunnel-handler.js";
import type { CallerFront } from "./caller-front.js";
import { PROXY_PATH } from "./frontend-listeners.js";
import type { ListenerSet } from "./listener-set.js";

const CONNECT_PATH = AGENT_SERVICE.connect!.path;

export type AgentListenerDeps = Pick<
  AgentAdmissionDeps,
  "authenticate" | "hold" | "quotas" | "registry" | "accepting" | "log" | "metrics"
> &
  Partial<Pick<AgentAdmissionDeps, "serverCount">> & {
    /** The instance's budget of periodic liveness probes (agent-liveness.ts). */
    probeTurns?: ProbeTurns;
  };

/**
 * What the agent listener reads of the server's options (the request-head bounds are the
 * frontend's: callers and the install route may share the agent port).
 */
export type AgentListenerOptions = Pick<
  ServerOptions,
  "serverId" | "serverCount" | "backendDialTimeoutMs" | "handshakes" | "tlsMinVersion"
> & {
  agent: Pick<ServerOptions["agent"], "tls" | "keepaliveMs" | "probeIntervalMs" | "livenessTimeoutMs">;
  frontend: Pick<ServerOptions["frontend"], "maxHeaderBytes" | "headerTimeoutMs">;
};

export function buildAgentListener(
  set: ListenerSet,
  opts: AgentListenerOptions,
  deps: AgentListenerDeps,
  callers?: CallerFront,
  /** GET requests on the port (tenant mode): self-status and the install link. */
  get?: GetRoute,
): TlsServer {
  const log = deps.log.child({ component: "agent-listener" });
  const admission: AgentAdmissionDeps = {
    ...deps,
    serverId: opts.serverId,
    serverCount: deps.serverCount ?? (() => opts.serverCount),
    dialTimeoutMs: opts.backendDialTimeoutMs,
    liveness: {
      probeIntervalMs: opts.agent.probeIntervalMs,
      answerTimeoutMs: Math.min(AGENT_PROBE_ANSWER_MS, opts.agent.probeIntervalMs),
      deadAfterMs: opts.agent.livenessTimeoutMs,
      ...(deps.probeTurns ? { probeTurns: deps.probeTurns } : {}),
    },
    log,
  };
  // A frozen agent keeps its tunnels for the liveness timeout: no transport check may end them
  // sooner.
  const answerMs = Math.max(KEEPALIVE_TIMEOUT_MS, opts.agent.livenessTimeoutMs);
  const watch = set.peerWatch("agent", answerMs);
  const grpc = set.grpcServer({
    methods: {
      [CONNECT_PATH]: createAgentConnectHandler(admission),
      ...(callers ? { [PROXY_PATH]: callers.proxyMethod("gateway") } : {}),
    },
    maxMessageBytes: MAX_MESSAGE_BYTES,
    keepaliveMs: opts.agent.keepaliveMs,
    keepaliveTimeoutMs: answerMs,
    // Client certificates are optional here: a connection must show its credential (the first
    // call's metadata, or the certificate a caller's first call relies on) as promptly as a TLS
    // handshake.
    firstCallTimeoutMs: opts.handshakes.timeoutMs,
    // Our gRPC server reports its writes and reads: idle agents cost the watch nothing.
    onSession: (session, transport) => watch.watch(session, transport, { activityReported: true }),
    log: log.child({ transport: "grpc" }),
  });
  const acceptTunnel = createAgentTunnelHandler(admission, {
    handshakeTimeoutMs: opts.handshakes.timeoutMs,
    keepaliveMs: opts.agent.keepaliveMs,
    keepaliveTimeoutMs: answerMs,
  });
  const server = createTlsServer({
    ...serverTlsSettings(opts.agent.tls, opts.tlsMinVersion, false, "cluster"),
    // Server preference decides: our agents offer both and get the tunnel, upstream agents offer
    // only h2, kube-apiserver's HTTPConnect client none or http/1.1.
    ...(get
      ? { ALPNCallback: ({ protocols }: { protocols: string[] }) => chooseWithInstall(protocols) }
      : { ALPNProtocols: callers ? [TUNNEL_ALPN, "h2", "http/1.1"] : [TUNNEL_ALPN, "h2"] }),
    handshakeTimeout: opts.handshakes.timeoutMs,
  });
  const connectionOptions = callers && {
    ...callers.connectionOptions("gateway", grpc, {
      maxHeaderBytes: opts.frontend.maxHeaderBytes,
      headerTimeoutMs: opts.frontend.headerTimeoutMs,
    }),
    // GET /v1/status and /v1/install/<token>.yaml beside CONNECT, under the same head limits.
    ...(get ? { onGet: get } : {}),
  };
  server.on("secureConnection", (socket: TLSSocket) => {
    if (socket.alpnProtocol === TUNNEL_ALPN) void acceptTunnel(socket);
    else if (connectionOptions) acceptFrontendConnection(socket, connectionOptions);
    else grpc.accept(socket);
  });
  set.trackTls(server, "agent", opts.handshakes);
  return server;
}

/**
 * ALPN with GET routes on: as the server preference above, except that a client offering
 * http/1.1 gets it even if it offers h2 too. kubectl (Go's net/http) and curl offer both and
 * fetch the install link (and curl the status) over HTTP/1.1; gRPC clients (grpc-go, grpc-js, our agent) offer h2 and
 * never http/1.1, so they still get h2. undefined (no protocol in common) refuses the handshake.
 */
export function chooseWithInstall(offered: readonly string[]): string | undefined {
  for (const p of [TUNNEL_ALPN, "http/1.1", "h2"]) if (offered.includes(p)) return p;
  return undefined;
}
