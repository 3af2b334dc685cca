/**
 * A TLS port that serves the one-line install (`GET /v1/install/<token>.yaml`) and nothing else
 * (--install-port). In AWS the install URL must be trusted by kubectl without flags, so a load
 * balancer's TLS listener with a publicly trusted certificate sits in front and forwards here
 * over TLS again (cdk/); the gateway port keeps the gateway CA's certificate, which agents and
 * kube-apiservers verify. No client certificates, no CONNECT, no gRPC: anything but the GET gets
 * the same answers as on the gateway port (405, 400, 408, 431) and is closed.
 */
import type { Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket, type Server as TlsServer } from "node:tls";
import type { ServerOptions } from "../../config/server-options.js";
import { httpStatusFor, MethodNotAllowedError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { refusalLog } from "../../observability/refusal-log.js";
import { acceptFrontendConnection } from "../../transport/frontend-connection.js";
import { formatConnectResponse } from "../../transport/http-connect-parser.js";
import { serverTlsSettings } from "../../transport/tls-files.js";
import type { InstallRoute } from "../install/install-route.js";
import type { ListenerSet } from "./listener-set.js";

const LISTENER = "install";

/**
 * What the install listener reads of the server's options: it serves with the agent port's
 * certificate and the frontend's request-head bounds.
 */
export type InstallListenerOptions = Pick<ServerOptions, "handshakes" | "tlsMinVersion"> & {
  agent: Pick<ServerOptions["agent"], "tls">;
  frontend: Pick<ServerOptions["frontend"], "maxHeaderBytes" | "headerTimeoutMs">;
};

export function buildInstallListener(
  set: ListenerSet,
  opts: InstallListenerOptions,
  install: InstallRoute,
  deps: { log: Logger; metrics: ServerMetrics },
): TlsServer {
  const log = deps.log.child({ component: "install-listener" });
  const server = createTlsServer({
    // The gateway's serving certificate, without asking for a client certificate.
    ...serverTlsSettings({ ...opts.agent.tls, ca: "" }, opts.tlsMinVersion, false, "cluster"),
    ALPNProtocols: ["http/1.1"],
    handshakeTimeout: opts.handshakes.timeoutMs,
  });
  const refuse = (socket: Socket) => {
    const err = new MethodNotAllowedError("CONNECT");
    deps.metrics.rejectedConnections.inc({ listener: LISTENER, reason: err.code });
    socket.on("error", () => {});
    socket.end(formatConnectResponse(httpStatusFor(err), undefined, { Allow: "GET" }));
    socket.destroySoon();
  };
  // One for the listener: its connections share the budget (refusal-log.ts).
  const refusals = refusalLog(log);
  server.on("secureConnection", (socket: TLSSocket) =>
    acceptFrontendConnection(socket, {
      listener: LISTENER,
      refusals,
      maxHeaderBytes: opts.frontend.maxHeaderBytes,
      headerTimeoutMs: opts.frontend.headerTimeoutMs,
      log,
      metrics: deps.metrics,
      // Only reachable by a client that sent the HTTP/2 preface without ALPN: not served here.
      onGrpc: (connection) => connection.destroy(),
      onConnect: (socket) => refuse(socket),
      onGet: install,
    }),
  );
  set.trackTls(server, LISTENER, opts.handshakes);
  return server;
}
