/**
 * The caller's side of every listener that serves callers: the ProxyService.Proxy method and the
 * CONNECT handler, each authenticating its caller before anything else. The frontend's own
 * listeners (frontend-listeners.ts) and, in tenant mode, the agent port serving every role
 * (agent-listener.ts) mount the same pieces.
 *
 * A caller is authenticated per gRPC call and per CONNECT request, from what its connection
 * proved (a verified client certificate, the Unix socket) and what the call or request carries
 * (a bearer token): a credential revoked since the connection opened is refused on the next call,
 * and the calls and tunnels it has open are registered with the policy's CredentialHold, which
 * closes them.
 */
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { type PeerCertificate, TLSSocket } from "node:tls";
import { GatewayError, grpcStatusFor } from "../../errors.js";
import { dialStepMetrics } from "../../metrics/dial-step-metrics.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import { budgetedInfo } from "../../observability/log-budget.js";
import type { Logger } from "../../observability/logger.js";
import { refusalLog } from "../../observability/refusal-log.js";
import type { FrontendConnectionOptions } from "../../transport/frontend-connection.js";
import type { GrpcMethodHandler, GrpcServer } from "../../transport/grpc/server.js";
import { connectRefusalResponse, grpcRefusalTrailers } from "../../transport/refusal-details.js";
import { resetSocket } from "../../transport/reset-socket.js";
import {
  bindDialer,
  type CallerIdentity,
  type CallerListener,
  type CredentialHold,
  type Dialer,
} from "../core/dial-context.js";
import { GrpcFrontendSession } from "../core/frontend-session.js";
import type { CallerAuthenticator, CallerCredentials } from "../policy/caller-auth.js";
import { metadataValues } from "./agent-connect-handler.js";
import { type ConnectTunnel, serveConnect } from "./connect-frontend.js";

export interface CallerFrontDeps {
  dialer: Dialer;
  authenticateCaller: CallerAuthenticator;
  hold: CredentialHold;
  /** Sessions open now, so that shutdown can end them. */
  sessions: Set<GrpcFrontendSession>;
  /** CONNECT sockets whose tunnel ended and that are flushing to their caller (connect-frontend.ts). */
  endingTunnels?: Set<Socket>;
  log: Logger;
  metrics: ServerMetrics;
  /**
   * Told of every caller refused (credential, policy, quota), with the address it came from, so
   * that a source that keeps being refused is refused more cheaply (refusal-throttle.ts).
   */
  refusedFrom?: (remoteAddress: string | undefined) => void;
  /** Time each CONNECT dial's steps (--dial-step-metrics; lib/observability/dial-steps.ts). */
  dialStepMetrics?: boolean;
  /** Told of each chunk a CONNECT tunnel reads from its caller (GatewayDeps.callerBytesRead). */
  bytesRead?: (bytes: number) => void;
}

export interface CallerFront {
  /** ProxyService.Proxy for a GrpcServer whose connections `listener` accepted. */
  proxyMethod(listener: CallerListener): GrpcMethodHandler;
  /** What acceptFrontendConnection needs for a connection accepted on `listener`. */
  connectionOptions(
    listener: CallerListener,
    grpc: GrpcServer,
    limits: { maxHeaderBytes: number; headerTimeoutMs: number },
  ): FrontendConnectionOptions;
}

/** Lines a second, per kind, that a flood of refusals or failed dials may write at info. */
const LOG_LINES_PER_SECOND = 10;

/** The address a caller's connection came from; undefined for a Unix socket or a gone peer. */
function remoteAddressOf(transport: Duplex): string | undefined {
  return (transport as Partial<Socket>).remoteAddress;
}

/** Proxy-Authenticate on a 407: RFC 9110 requires it, and it tells a client which scheme to use. */
const PROXY_AUTHENTICATE = { "Proxy-Authenticate": 'Bearer realm="kgw"' };

export function createCallerFront(deps: CallerFrontDeps): CallerFront {
  const { metrics } = deps;
  const startSteps = deps.dialStepMetrics ? dialStepMetrics(metrics) : undefined;
  // One child logger per kind, not per connection: each costs a few hundred bytes.
  const frontendLog = deps.log.child({ component: "frontend" });
  const connectLog = deps.log.child({ component: "connect" });
  /** A connection's verified certificate, read once (getPeerCertificate builds a new object). */
  const certificates = new WeakMap<Duplex, PeerCertificate | null>();
  const verifiedCertificateOf = (transport: Duplex): PeerCertificate | undefined => {
    let cert = certificates.get(transport);
    if (cert === undefined) {
      cert = transport instanceof TLSSocket && transport.authorized ? transport.getPeerCertificate() : null;
      certificates.set(transport, cert);
    }
    return cert ?? undefined;
  };

  const authenticate = (
    listener: CallerListener,
    transport: Duplex,
    authorization: readonly string[],
  ): CallerIdentity | GatewayError => {
    const creds: CallerCredentials = {
      listener,
      verifiedCertificate: verifiedCertificateOf(transport),
      authorization,
    };
    try {
      return deps.authenticateCaller(creds);
    } catch (err) {
      if (err instanceof GatewayError) return err;
      throw err;
    }
  };

  // Budgets for lines a misbehaving client can repeat at will (log-budget.ts).
  // A refused caller has not authenticated: its line goes through the refusal log (bounded,
  // redacted: refusal-log.ts).
  const logRefusedCaller = refusalLog(deps.log.child({ component: "caller-auth" }));
  const logConnectFailure = budgetedInfo(connectLog, LOG_LINES_PER_SECOND);

  const refused = (listener: CallerListener, err: GatewayError, transport: Duplex) => {
    metrics.rejectedConnections.inc({ listener, reason: err.code });
    deps.refusedFrom?.(remoteAddressOf(transport));
    // The reason (CredentialRefusedError.reason) is for the operator; the peer gets one message.
    // So are the tenant and credential a refused credential named, when they exist in the
    // store (never a value only the caller wrote: claimedBy, lib/tenancy/errors.ts).
    const claimed = (err as { claimedBy?: { tenant: string; credential?: string } }).claimedBy;
    logRefusedCaller({ err: err.message }, "refused a caller", {
      listener,
      code: err.code,
      reason: (err as { reason?: string }).reason,
      ...(claimed ? { tenant: claimed.tenant, credential: claimed.credential } : {}),
    });
  };

  return {
    proxyMethod: (listener) => (request) => {
      const caller = authenticate(
        listener,
        request.transport,
        metadataValues(request.headers, "authorization"),
      );
      if (caller instanceof GatewayError) {
        refused(listener, caller, request.transport);
        const code = grpcStatusFor(caller);
        request.refuse(code, caller.message, grpcRefusalTrailers(code, caller));
        return;
      }
      const call = request.accept();
      const session = new GrpcFrontendSession(
        call,
        bindDialer(deps.dialer, { caller, frontend: "grpc" }),
        // Every line about the session's dials names its tenant and credential (a stream carries
        // many dials: one child per stream, not per dial).
        frontendLog.child({ tenant: caller.tenant, principal: caller.principal }),
        metrics,
      );
      const release = deps.hold(caller.credential, (err) => session.abort(err));
      deps.sessions.add(session);
      metrics.grpcConnections.inc({ service_method: "Proxy" });
      call.once("close", () => {
        release();
        deps.sessions.delete(session);
        metrics.grpcConnections.dec({ service_method: "Proxy" });
      });
    },

    connectionOptions: (listener, grpc, limits) => {
      const log = deps.log.child({ component: "frontend", listener });
      return {
        listener,
        maxHeaderBytes: limits.maxHeaderBytes,
        headerTimeoutMs: limits.headerTimeoutMs,
        log,
        // One per listener: its connections share the budget (refusal-log.ts).
        refusals: refusalLog(log),
        metrics,
        onGrpc: (transport) => grpc.accept(transport),
        onConnect: (socket: Socket, request, rest) => {
          // The request head has been read: the dial's clock starts (its steps: dial-steps.ts).
          const steps = startSteps?.();
          const caller = authenticate(listener, socket, request.headers.get("proxy-authorization") ?? []);
          steps?.mark("identity");
          if (caller instanceof GatewayError) {
            refused(listener, caller, socket);
            socket.on("error", () => {});
            const extra = caller.code === "ERR_PROXY_AUTH_REQUIRED" ? PROXY_AUTHENTICATE : undefined;
            socket.end(connectRefusalResponse(caller, extra));
            socket.destroySoon();
            return;
          }
          // A tunnel on a revoked credential is broken off, not finished: its caller reads an
          // error after what it was sent, never a FIN (connect-frontend.ts, break-socket.ts).
          let tunnel: ConnectTunnel | undefined;
          const release = deps.hold(caller.credential, () =>
            tunnel ? tunnel.breakOff() : resetSocket(socket),
          );
          socket.once("close", release);
          tunnel = serveConnect({
            socket,
            address: request.target,
            rest,
            dialer: bindDialer(deps.dialer, { caller, frontend: "connect", ...(steps ? { steps } : {}) }),
            steps,
            caller,
            log: connectLog,
            logFailure: logConnectFailure,
            refused: deps.refusedFrom && (() => deps.refusedFrom?.(socket.remoteAddress)),
            metrics,
            ...(deps.endingTunnels ? { ending: deps.endingTunnels } : {}),
            ...(deps.bytesRead ? { bytesRead: deps.bytesRead } : {}),
          });
        },
      };
    },
  };
}
