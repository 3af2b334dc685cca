/**
 * The frontend: gRPC ProxyService and HTTP CONNECT on the same listeners (TCP with TLS, or
 * plaintext when asked for, and the Unix socket), told apart by ALPN or by the first bytes
 * (lib/transport/frontend-connection.ts). What happens to a caller there (authentication per call
 * or request, the dial, revocation) is caller-front.ts; this file builds the listeners.
 */
import { type AddressInfo, createServer as createNetServer, type Server } from "node:net";
import { createServer as createTlsServer } from "node:tls";
import type { ServerOptions } from "../../config/server-options.js";
import { acceptFrontendConnection } from "../../transport/frontend-connection.js";
import { PROXY_SERVICE } from "../../transport/grpc/services.js";
import { listenTcp, listenUnix } from "../../transport/listen.js";
import { serverTlsSettings } from "../../transport/tls-files.js";
import type { CallerListener } from "../core/dial-context.js";
import { KEEPALIVE_TIMEOUT_MS, MAX_MESSAGE_BYTES } from "../durations.js";
import type { CallerFront } from "./caller-front.js";
import type { ListenerSet } from "./listener-set.js";

export const PROXY_PATH = PROXY_SERVICE.proxy!.path;

export interface FrontendAddresses {
  tcp: AddressInfo | null;
  uds: string | null;
}

/** What the frontend listeners read of the server's options. */
export type FrontendListenerOptions = Pick<ServerOptions, "frontend" | "handshakes" | "tlsMinVersion">;

export async function buildFrontendListeners(
  set: ListenerSet,
  opts: FrontendListenerOptions,
  callers: CallerFront,
): Promise<FrontendAddresses> {
  const watch = set.peerWatch("frontend", KEEPALIVE_TIMEOUT_MS);
  const log = set.log.child({ component: "frontend" });
  const limits = {
    maxHeaderBytes: opts.frontend.maxHeaderBytes,
    headerTimeoutMs: opts.frontend.headerTimeoutMs,
  };
  // One gRPC server per listener, so that a call knows where its caller came from.
  const connectionOptions = (listener: CallerListener) => {
    const grpc = set.grpcServer({
      methods: { [PROXY_PATH]: callers.proxyMethod(listener) },
      maxMessageBytes: MAX_MESSAGE_BYTES,
      keepaliveMs: opts.frontend.keepaliveMs,
      keepaliveTimeoutMs: KEEPALIVE_TIMEOUT_MS,
      // Callers on TLS showed a certificate already; on the Unix socket, the file's permissions.
      firstCallTimeoutMs: 0,
      onSession: (session, transport) => watch.watch(session, transport),
      log,
    });
    return callers.connectionOptions(listener, grpc, limits);
  };

  let tcp: AddressInfo | null = null;
  if (opts.frontend.port !== null) {
    const tcpOptions = connectionOptions("tcp");
    let server: Server;
    if (opts.frontend.tls) {
      const tlsServer = createTlsServer({
        ...serverTlsSettings(
          opts.frontend.tls,
          opts.tlsMinVersion,
          opts.frontend.clientCertRequired,
          "server",
        ),
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
