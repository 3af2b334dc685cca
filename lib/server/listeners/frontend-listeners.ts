/**
 * The frontend: gRPC ProxyService and HTTP CONNECT on the same listeners (TCP with TLS, or
 * plaintext when asked for, and the Unix socket), told apart by ALPN or by the first bytes
 * (lib/transport/frontend-connection.ts).
 *
 * Every caller is authenticated once, when its connection (gRPC) or request (CONNECT) is accepted;
 * the identity becomes the DialContext of every dial it makes, and the gateway's Dialer decides
 * from there. A caller that is not accepted gets UNAUTHENTICATED or a 401 and nothing else.
 */
import { type AddressInfo, createServer as createNetServer, type Server, type Socket } from "node:net";
import type { Duplex } from "node:stream";
import { createServer as createTlsServer, TLSSocket } from "node:tls";
import type { ServerOptions } from "../../config/server-options.js";
import { GatewayError, grpcStatusFor, httpStatusFor, UnauthenticatedError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import {
  acceptFrontendConnection,
  type FrontendConnectionOptions,
} from "../../transport/frontend-connection.js";
import { PROXY_SERVICE } from "../../transport/grpc-services.js";
import { formatConnectResponse } from "../../transport/http-connect-parser.js";
import { listenTcp, listenUnix } from "../../transport/listen.js";
import { serverTlsSettings } from "../../transport/tls-files.js";
import { bindDialer, type CallerIdentity, type CallerListener, type Dialer } from "../core/dial-context.js";
import { GrpcFrontendSession } from "../core/frontend-session.js";
import type { CallerAuthenticator } from "../policy/caller-auth.js";
import { KEEPALIVE_TIMEOUT_MS, MAX_MESSAGE_BYTES } from "../timeouts.js";
import { serveConnect } from "./connect-frontend.js";
import type { ListenerSet } from "./listener-set.js";

const PROXY_PATH = PROXY_SERVICE.proxy!.path;

export interface FrontendDeps {
  dialer: Dialer;
  authenticateCaller: CallerAuthenticator;
  /** Sessions open now, so that shutdown can end them. */
  sessions: Set<GrpcFrontendSession>;
  log: Logger;
  metrics: ServerMetrics;
}

export interface FrontendAddresses {
  tcp: AddressInfo | null;
  uds: string | null;
}

/** The client certificate the handshake verified, if the caller came over TLS with one. */
function verifiedCertificateOf(transport: Duplex) {
  return transport instanceof TLSSocket && transport.authorized ? transport.getPeerCertificate() : undefined;
}

export async function buildFrontendListeners(
  set: ListenerSet,
  opts: ServerOptions,
  deps: FrontendDeps,
): Promise<FrontendAddresses> {
  const { log, metrics } = deps;
  // One child logger per kind, not per connection: each costs a few hundred bytes.
  const frontendLog = log.child({ component: "frontend" });
  const connectLog = log.child({ component: "connect" });
  /** Each gRPC connection's caller, authenticated once when the connection was accepted. */
  const callers = new WeakMap<Duplex, CallerIdentity | GatewayError>();

  const authenticate = (
    listener: CallerListener,
    transport: Duplex,
    proxyAuthorization: readonly string[],
  ) => {
    try {
      return deps.authenticateCaller({
        listener,
        verifiedCertificate: verifiedCertificateOf(transport),
        proxyAuthorization,
      });
    } catch (err) {
      if (err instanceof GatewayError) return err;
      throw err;
    }
  };

  const watch = set.peerWatch("frontend", KEEPALIVE_TIMEOUT_MS);
  const grpc = set.grpcServer({
    methods: {
      [PROXY_PATH]: (request) => {
        const caller = callers.get(request.transport);
        if (!caller || caller instanceof GatewayError) {
          // Every connection is authenticated in onGrpc before it reaches here; be safe anyway.
          const err = caller ?? new UnauthenticatedError("the caller's connection was not authenticated");
          metrics.rejectedConnections.inc({ listener: "frontend", reason: err.code });
          request.refuse(grpcStatusFor(err), err.message);
          return;
        }
        const call = request.accept();
        const session = new GrpcFrontendSession(
          call,
          bindDialer(deps.dialer, { caller }),
          frontendLog,
          metrics,
        );
        deps.sessions.add(session);
        metrics.grpcConnections.inc({ service_method: "Proxy" });
        call.once("close", () => {
          deps.sessions.delete(session);
          metrics.grpcConnections.dec({ service_method: "Proxy" });
        });
      },
    },
    maxMessageBytes: MAX_MESSAGE_BYTES,
    keepaliveMs: opts.frontend.keepaliveMs,
    keepaliveTimeoutMs: KEEPALIVE_TIMEOUT_MS,
    // Callers on TLS showed a certificate already; on the Unix socket, the file's permissions.
    firstCallTimeoutMs: 0,
    onSession: (session, transport) => watch.watch(session, transport),
    log: frontendLog,
  });

  const connectionOptions = (listener: CallerListener): FrontendConnectionOptions => ({
    listener,
    maxHeaderBytes: opts.frontend.maxHeaderBytes,
    headerTimeoutMs: opts.frontend.headerTimeoutMs,
    log: log.child({ component: "frontend", listener }),
    metrics,
    onGrpc: (transport) => {
      callers.set(transport, authenticate(listener, transport, []));
      grpc.accept(transport);
    },
    onConnect: (socket: Socket, request, rest) => {
      const caller = authenticate(listener, socket, request.headers.get("proxy-authorization") ?? []);
      if (caller instanceof GatewayError) {
        metrics.rejectedConnections.inc({ listener, reason: caller.code });
        connectLog.info({ listener, code: caller.code, err: caller.message }, "refused a CONNECT caller");
        socket.on("error", () => {});
        socket.end(formatConnectResponse(httpStatusFor(caller)));
        socket.destroySoon();
        return;
      }
      serveConnect({
        socket,
        address: request.target,
        rest,
        dialer: bindDialer(deps.dialer, { caller }),
        log: connectLog,
        metrics,
      });
    },
  });

  let tcp: AddressInfo | null = null;
  if (opts.frontend.port !== null) {
    const tcpOptions = connectionOptions("tcp");
    let server: Server;
    if (opts.frontend.tls) {
      const tlsServer = createTlsServer({
        ...serverTlsSettings(opts.frontend.tls, opts.tlsMinVersion, true, "server"),
        ALPNProtocols: ["h2", "http/1.1"],
        handshakeTimeout: opts.handshakes.timeoutMs,
      }).on("secureConnection", (s) => acceptFrontendConnection(s, tcpOptions));
      set.trackTls(tlsServer, "frontend", opts.handshakes);
      server = tlsServer;
    } else {
      server = createNetServer((s) => acceptFrontendConnection(s, tcpOptions));
      set.track(server);
    }
    tcp = await listenTcp(server, opts.frontend.port, opts.frontend.host);
  }
  let uds: string | null = null;
  if (opts.frontend.udsPath) {
    const udsOptions = connectionOptions("uds");
    const server = createNetServer((s) => acceptFrontendConnection(s, udsOptions));
    set.track(server);
    uds = await listenUnix(server, opts.frontend.udsPath, opts.frontend.deleteExistingUds);
  }
  return { tcp, uds };
}
