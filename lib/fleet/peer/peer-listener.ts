/**
 * The peer port (--peer-port): where other instances of the fleet forward dials for tenants
 * whose agents are connected here. TLS 1.2+ with client certificates required (the peer CA)
 * and ALPN h2, then ProxyService.Proxy on our gRPC server, one dial per call (peer-session.ts),
 * with the caller's context in the call's metadata (peer-context.ts).
 *
 * A connection whose certificate chains to the peer CA but is not a fleet peer's (no
 * kgw://fleet/peer URI SAN: a tenant's certificate from a CA shared with the tenants) is not
 * dropped silently: each of its calls is refused with UNAUTHENTICATED, saying why, and the
 * connection is closed (GOAWAY). Calls with missing or malformed context are refused with
 * INVALID_ARGUMENT. Either way nothing is dialed, and other peers' connections are untouched.
 *
 * A second method, PEER_AGENTS_PATH (peer-agents-call.ts), answers a peer asking whether the
 * tenant's agents are here, for routing while the registry cannot be read; a third,
 * PEER_STATUS_PATH (peer-status-call.ts), sends this instance's status slice to a peer answering
 * the status API for the fleet.
 *
 * The dialer given here is the gateway's local one: this instance's policy, quotas and audit,
 * and only its own agents, so a forwarded dial is never forwarded again.
 */

import type { Http2Session } from "node:http2";
import type { AddressInfo } from "node:net";
import type { Duplex } from "node:stream";
import { createServer as createTlsServer, TLSSocket } from "node:tls";
import type { ServerOptions } from "../../config/server-options.js";
import { GrpcCode } from "../../errors.js";
import { MAX_MESSAGE_BYTES, PEER_KEEPALIVE_MS, PEER_KEEPALIVE_TIMEOUT_MS } from "../../server/durations.js";
import type { ListenerSet } from "../../server/listeners/listener-set.js";
import type { PeerListenerDeps } from "../../server/routing.js";
import type { GrpcMethodHandler, GrpcRequest } from "../../transport/grpc/server.js";
import { listenTcp } from "../../transport/listen.js";
import { serverTlsSettings } from "../../transport/tls-files.js";
import { PEER_AGENTS_HEADER, PEER_AGENTS_PATH } from "./peer-agents-call.js";
import { PEER_PROXY_PATH, PeerHeader, parsePeerContext, parsePeerTenant } from "./peer-context.js";
import { PEER_IDENTITY_URI, peerCertificateProblem } from "./peer-identity.js";
import { PeerServeSession } from "./peer-session.js";
import { PEER_STATUS_PATH } from "./peer-status-call.js";

/** What the peer listener reads of the server's options. */
export type PeerListenerOptions = Pick<ServerOptions, "peer" | "handshakes" | "tlsMinVersion">;

/** Builds the peer listener on `set` and listens; resolves with its address (a PeerListenerBuilder). */
export async function buildPeerListener(
  set: ListenerSet,
  opts: PeerListenerOptions,
  deps: PeerListenerDeps,
): Promise<AddressInfo> {
  const peer = opts.peer;
  if (!peer) throw new Error("buildPeerListener without --peer-port");
  const { metrics } = deps;
  const log = deps.log.child({ component: "peer-listener" });
  const watch = set.peerWatch("peer", PEER_KEEPALIVE_TIMEOUT_MS);
  /** Each connection's verdict on its certificate, read once (null: a fleet peer). */
  const verdicts = new WeakMap<Duplex, string | null>();
  const sessions = new WeakMap<Duplex, Http2Session>();
  const verdictOf = (transport: Duplex): string | null => {
    let v = verdicts.get(transport);
    if (v === undefined) {
      v =
        transport instanceof TLSSocket && transport.authorized
          ? peerCertificateProblem(transport.getPeerCertificate())
          : "no verified client certificate";
      verdicts.set(transport, v);
    }
    return v;
  };

  /** Refuses (and answers) a call whose connection is not a fleet peer's; true if it did. */
  const refusedNotPeer = (request: GrpcRequest): boolean => {
    const problem = verdictOf(request.transport);
    if (problem === null) return false;
    metrics.rejectedConnections.inc({ listener: "peer", reason: "not_a_peer" });
    log.warn({ reason: problem }, "refused a peer call: not a fleet peer certificate");
    request.refuse(
      GrpcCode.UNAUTHENTICATED,
      `not a fleet peer (a peer certificate carries the URI SAN ${PEER_IDENTITY_URI}): ${problem}`,
    );
    // GOAWAY: the refusal goes out, then the connection closes.
    sessions.get(request.transport)?.close();
    return true;
  };

  const proxy: GrpcMethodHandler = (request) => {
    if (refusedNotPeer(request)) return;
    const ctx = parsePeerContext(request.headers);
    if ("problem" in ctx) {
      metrics.peerDialsServed.inc({ outcome: "invalid" });
      log.warn({ reason: ctx.problem }, "refused a peer call: bad context metadata");
      request.refuse(GrpcCode.INVALID_ARGUMENT, `peer context: ${ctx.problem}`);
      return;
    }
    const call = request.accept();
    // The dial carries its origin and id: the origin audits it and counts it for the tenant;
    // the session hears which agent took it (routed) to tell the origin.
    const session: PeerServeSession = new PeerServeSession(
      call,
      (req, frontend) =>
        deps.dialer(
          {
            caller: ctx.caller,
            frontend: ctx.frontend,
            origin: ctx.origin,
            ...(ctx.dialId === undefined ? {} : { dialId: ctx.dialId }),
            observer: session,
          },
          req,
          frontend,
        ),
      (outcome) => metrics.peerDialsServed.inc({ outcome }),
      log,
      { origin: ctx.origin, dialId: ctx.dialId },
    );
  };

  // A peer asking whether the tenant's agents are here (peer-agents-call.ts).
  const agents: GrpcMethodHandler = (request) => {
    if (refusedNotPeer(request)) return;
    const tenant = parsePeerTenant(request.headers);
    if (typeof tenant !== "string") {
      metrics.peerProbesServed.inc({ outcome: "invalid" });
      log.warn({ reason: tenant.problem }, "refused a peer probe: bad context metadata");
      request.refuse(GrpcCode.INVALID_ARGUMENT, `peer context: ${tenant.problem}`);
      return;
    }
    const n = deps.agentsOf(tenant);
    metrics.peerProbesServed.inc({ outcome: n > 0 ? "has_agents" : "no_agents" });
    request.accept({ [PEER_AGENTS_HEADER]: [String(n)] }).end();
  };

  // A peer answering the status API for the fleet: this instance's slice, from memory.
  const status: GrpcMethodHandler = (request) => {
    if (refusedNotPeer(request)) return;
    let tenant: string | undefined;
    if (request.headers[PeerHeader.tenant] !== undefined) {
      const parsed = parsePeerTenant(request.headers);
      if (typeof parsed !== "string") {
        log.warn({ reason: parsed.problem }, "refused a peer status call: bad context metadata");
        request.refuse(GrpcCode.INVALID_ARGUMENT, `peer context: ${parsed.problem}`);
        return;
      }
      tenant = parsed;
    }
    request.reply(Buffer.from(JSON.stringify(deps.status(tenant)), "utf8"));
  };

  const grpc = set.grpcServer({
    methods: { [PEER_PROXY_PATH]: proxy, [PEER_AGENTS_PATH]: agents, [PEER_STATUS_PATH]: status },
    maxMessageBytes: MAX_MESSAGE_BYTES,
    keepaliveMs: PEER_KEEPALIVE_MS,
    keepaliveTimeoutMs: PEER_KEEPALIVE_TIMEOUT_MS,
    // A peer opens its link for a dial; one that opens none is closed as promptly as a handshake.
    firstCallTimeoutMs: opts.handshakes.timeoutMs,
    onSession: (session, transport) => {
      sessions.set(transport, session);
      watch.watch(session, transport);
      metrics.peerConnections.inc({ role: "server" });
      session.once("close", () => metrics.peerConnections.dec({ role: "server" }));
    },
    log: log.child({ transport: "grpc" }),
  });
  const server = createTlsServer({
    ...serverTlsSettings(peer.tls, opts.tlsMinVersion, true, "peer"),
    ALPNProtocols: ["h2"],
    handshakeTimeout: opts.handshakes.timeoutMs,
  });
  server.on("secureConnection", (socket: TLSSocket) => {
    if (socket.alpnProtocol !== "h2") {
      // Only gRPC is served here; a client that negotiated nothing gets nothing.
      metrics.rejectedConnections.inc({ listener: "peer", reason: "alpn" });
      socket.destroy();
      return;
    }
    grpc.accept(socket);
  });
  set.trackTls(server, "peer", opts.handshakes);
  return listenTcp(server, peer.port, peer.host);
}
