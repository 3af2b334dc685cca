/**
 * The agent's side of one server stream (AgentService.Connect): dials backends on DIAL_REQ and
 * carries their bytes. The mirror image of the server's AgentSession.
 *
 * A dial resolves the host, asks the destination policy about every address, and only then
 * connects, to those addresses only; a refused dial never opens a socket.
 *
 * Invariants:
 *  - a pending dial (resolving or connecting) ends exactly once: connected (DIAL_RSP with a
 *    connectID), failed or timed out (DIAL_RSP with an error), refused by the destination policy
 *    (DIAL_RSP with an error carrying DESTINATION_NOT_ALLOWED), cancelled by DIAL_CLS (nothing
 *    sent), or dropped because the stream ended (socket destroyed, nothing sent);
 *  - every established connection is in `conns` until its CLOSE_RSP has been sent or the
 *    stream has ended; when the stream ends, every socket is destroyed at once;
 *  - nothing is queued per connection (see EndpointConnection); the only buffers are the
 *    stream's and the sockets' own: each high-water mark plus at most one chunk per connection
 *    (the one whose write reported backpressure).
 */
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import { EgressCache } from "../egress/egress-wire.js";
import type { CompiledEgress } from "../egress/judge.js";
import { DESTINATION_NOT_ALLOWED, DestinationNotAllowedError } from "../errors.js";
import type { AgentMetrics } from "../metrics/agent-metrics.js";
import type { Logger } from "../observability/logger.js";
import {
  closeResponse,
  credit,
  type DialRequestPacket,
  dialResponse,
  drain,
  type Packet,
  PacketType,
  packetTypeName,
} from "../proto/packet.js";
import { AGENT_RECEIVE_WINDOW_BYTES, ConnectionCredit, type FlowMode } from "../tunnel/flow-control.js";
import { PacketSink } from "../tunnel/packet-sink.js";
import type { PacketStream } from "../tunnel/packet-stream.js";
import { PauseLatch } from "../tunnel/pause-latch.js";
import type { ConnectIdAllocator } from "./connect-ids.js";
import { type DestinationPolicy, dropInDestinationPolicy } from "./destination-policy.js";
import { defaultSocketFactory, parseDialTarget, type SocketFactory, type TcpTarget } from "./dial-target.js";
import { EndpointConnection, type EndpointStreamSide } from "./endpoint-connection.js";
import { type HostResolver, type ResolvedAddress, systemResolver } from "./host-resolver.js";

/** Error text for a CLOSE_RSP answering a connectID this stream does not know. */
export const UNKNOWN_CONNECT_ID = "unknown connectID";

export interface BackendDialerOptions {
  dialTimeoutMs: number;
  /** "credit" when the server accepted our per-connection flow control offer. */
  flow?: FlowMode;
  connectIds: ConnectIdAllocator;
  connectSocket?: SocketFactory;
  /** Name resolution before the policy check; tests inject one that never touches DNS. */
  resolveHost?: HostResolver;
  /** Which resolved addresses may be dialed; link-local ones are refused when not given. */
  destinationPolicy?: DestinationPolicy;
  /** Told of each DIAL_REQ, before it is handled (lib/transport/dial-scavenger.ts). */
  dialReceived?: () => void;
  log: Logger;
  metrics: AgentMetrics;
}

interface PendingDial {
  random: bigint;
  address: string;
  /** null while the host is being resolved. */
  socket: Socket | null;
  timer: NodeJS.Timeout;
  startedAt: bigint;
}

export class BackendDialer extends EventEmitter<{
  closed: [];
  load: [load: number];
  serverDraining: [];
  serverCount: [count: number];
}> {
  private readonly pending = new Map<bigint, PendingDial>();
  private readonly conns = new Map<bigint, EndpointConnection>();
  /** Closed by the server, still flushing towards the backend; destroyed if the stream ends. */
  private readonly flushing = new Set<EndpointConnection>();
  private readonly sink: PacketSink;
  private readonly side: EndpointStreamSide;
  private readonly connectSocket: SocketFactory;
  private readonly resolveHost: HostResolver;
  private readonly destinationPolicy: DestinationPolicy;
  private readonly egressCache = new EgressCache();
  private ended = false;

  constructor(
    stream: PacketStream,
    private readonly opts: BackendDialerOptions,
  ) {
    super();
    this.sink = new PacketSink(stream);
    this.connectSocket = opts.connectSocket ?? defaultSocketFactory;
    this.resolveHost = opts.resolveHost ?? systemResolver;
    this.destinationPolicy = opts.destinationPolicy ?? dropInDestinationPolicy({ allowLinkLocal: false });
    this.side = {
      send: (packet) => this.send(packet),
      onceWritable: (cb) => this.sink.onceWritable(cb),
      readLatch: new PauseLatch(stream),
      backendClosed: (conn, error) => this.onBackendClosed(conn, error),
    };
    stream.on("data", (packet: Packet) => this.onPacket(packet));
    stream.on("error", (err: Error) => {
      opts.log.debug({ err: err.message }, "server stream error");
      // An errored stream may stay paused with unread packets and never emit "end".
      this.shutdown();
    });
    stream.once("end", () => {
      this.shutdown();
      // The server is done with us; finish our half too so the call completes.
      if (!stream.writableEnded && !stream.destroyed) stream.end();
    });
    stream.once("close", () => this.shutdown());
  }

  /** Dials in flight plus open connections: what this stream is carrying. */
  get load(): number {
    return this.pending.size + this.conns.size;
  }

  get isClosed(): boolean {
    return this.ended;
  }

  /** Tells the server this agent is going away: it should send new dials elsewhere. */
  sendDrain(): void {
    if (!this.ended) this.send(drain());
  }

  /**
   * Destroys every backend socket and pending dial; the owner closes the stream itself. With
   * `letFlush`, connections the server already closed keep writing their last bytes to the
   * backend (they need nothing from the stream; BACKEND_CLOSE_FLUSH_TIMEOUT_MS bounds them).
   */
  shutdown(letFlush = false): void {
    if (this.ended) return;
    this.ended = true;
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.socket?.destroy();
    }
    this.pending.clear();
    for (const conn of this.conns.values()) conn.abort();
    this.opts.metrics.openEndpointConnections.dec(this.conns.size);
    this.conns.clear();
    if (!letFlush) for (const conn of this.flushing) conn.abort();
    this.emit("load", 0);
    this.emit("closed");
  }

  private send(packet: Packet): boolean {
    this.opts.metrics.streamPackets.count("from_agent", packet);
    return this.sink.send(packet);
  }

  private onPacket(packet: Packet): void {
    if (this.ended) return;
    this.opts.metrics.streamPackets.count("to_agent", packet);
    switch (packet.type) {
      case PacketType.DIAL_REQ:
        this.opts.dialReceived?.();
        this.onDialRequest(packet);
        return;
      case PacketType.DIAL_CLS:
        this.cancelDial(packet.random);
        return;
      case PacketType.DATA: {
        const conn = this.conns.get(packet.connectId);
        if (conn) conn.write(packet.data);
        // Typically data that crossed our CLOSE_RSP; the answer lets the server forget it too.
        else this.send(closeResponse(packet.connectId, UNKNOWN_CONNECT_ID));
        return;
      }
      case PacketType.CLOSE_REQ:
        this.onCloseRequest(packet.connectId);
        return;
      case PacketType.KGW_CREDIT:
        // Unknown connection: closed while the credit was in flight. Nothing to do.
        this.conns.get(packet.connectId)?.replenish(Number(packet.bytes));
        return;
      case PacketType.KGW_SERVER_COUNT:
        // Sent only because we asked (lib/tunnel/server-count-updates.ts): the fleet changed.
        this.emit("serverCount", Number(packet.count));
        return;
      case PacketType.DRAIN:
        // The server is shutting down (drain advice, lib/tunnel/drain-advice.ts): our owner moves
        // to another server; the connections open here go on until they end.
        this.emit("serverDraining");
        return;
      default:
        // DIAL_RSP, CLOSE_RSP and unknown types mean nothing to an agent. Upstream logs
        // and carries on; dropping the stream would hurt every connection on it.
        this.opts.log.debug({ packetType: packetTypeName(packet) }, "ignoring unexpected packet from server");
    }
  }

  private onDialRequest(req: DialRequestPacket): void {
    const { random, address } = req;
    const log = this.opts.log;
    if (this.pending.has(random)) {
      // The server assigns randoms per stream and never reuses one while it is pending.
      log.warn({ random: String(random) }, "server reused a pending dial random; refusing the second dial");
      this.send(dialResponse(random, 0n, "duplicate dial random"));
      return;
    }
    const parsed = parseDialTarget(req.protocol, address);
    if (!parsed.ok) {
      this.dialFailed(random, address, parsed.error, "unknown");
      return;
    }
    // The tenant's egress policy, when the server sent one: the target again (the server judged
    // it too), then every address it resolves to. The agent's own policy applies as well.
    let egress: CompiledEgress | null = null;
    if (req.egress !== undefined) {
      try {
        egress = this.egressCache.get(req.egress);
      } catch (err) {
        // A policy we cannot read must not open the way: refuse the dial, keep the stream.
        this.dialRefused(random, address, "", "bad_policy", (err as Error).message);
        return;
      }
      const verdict = egress.judgeTarget(parsed.target.host, parsed.target.port);
      if (!verdict.allowed) {
        this.dialRefused(random, address, "", verdict.rule, verdict.reason);
        return;
      }
    }
    const pending: PendingDial = {
      random,
      address,
      socket: null,
      startedAt: process.hrtime.bigint(),
      // Covers resolution and connect, as Go's dial timeout does.
      timer: setTimeout(() => {
        this.endPending(pending);
        pending.socket?.destroy();
        // Go's wording for a dial timeout, as upstream agents report it.
        this.dialFailed(random, address, `dial tcp ${address}: i/o timeout`, "timeout");
      }, this.opts.dialTimeoutMs),
    };
    this.pending.set(random, pending);
    this.emit("load", this.load);
    this.resolveThenConnect(pending, parsed.target, egress).catch((err: Error) => {
      // Resolution failed (or an injected resolver, policy or socket factory threw).
      if (this.pending.get(random) !== pending) return;
      this.endPending(pending);
      pending.socket?.destroy();
      this.dialFailed(random, address, `dial tcp ${address}: ${err.message}`, "unknown");
    });
  }

  /** Resolve, check every address against the policy, then connect to those addresses only. */
  private async resolveThenConnect(
    pending: PendingDial,
    target: TcpTarget,
    egress: CompiledEgress | null,
  ): Promise<void> {
    const { random, address } = pending;
    const addresses: ResolvedAddress[] = await this.resolveHost(target.host);
    if (addresses.length === 0) throw new Error(`lookup ${target.host}: no such host`);
    // Cancelled (DIAL_CLS), timed out, or the stream ended while resolving.
    if (this.pending.get(random) !== pending) return;
    for (const a of addresses) {
      const dest = { host: target.host, port: target.port, address: a.address };
      // The tenant's policy (when the server sent one) and the agent's own must both allow it.
      const refused = [
        egress?.judgeAddress(dest.host, dest.port, dest.address),
        this.destinationPolicy(dest),
      ].find((v) => v !== undefined && !v.allowed);
      if (refused && !refused.allowed) {
        // One refused address refuses the dial: a name that resolves to metadata among other
        // addresses is not one a backend would have.
        this.endPending(pending);
        this.dialRefused(random, address, a.address, refused.rule, refused.reason);
        return;
      }
    }
    const socket = this.connectSocket({ ...target, addresses });
    pending.socket = socket;
    const onError = (err: Error) => {
      if (this.pending.get(random) !== pending) return;
      this.endPending(pending);
      socket.destroy();
      const reason = (err as NodeJS.ErrnoException).code === "ETIMEDOUT" ? "timeout" : "unknown";
      this.dialFailed(random, address, `dial tcp ${address}: ${err.message}`, reason);
    };
    // Stays attached after a cancel or timeout: a late error on the destroyed socket is ignored.
    socket.on("error", onError);
    socket.once("connect", () => {
      socket.off("error", onError);
      if (this.pending.get(random) !== pending) {
        socket.destroy(); // cancelled or timed out just as it connected
        return;
      }
      // Not endPending: the load must not dip to zero between the dial and the connection.
      clearTimeout(pending.timer);
      this.pending.delete(random);
      this.established(pending, socket);
    });
  }

  private established(p: PendingDial, socket: Socket): void {
    const connectId = this.opts.connectIds.next();
    const log = this.opts.log.child({ connectId: String(connectId) });
    const flowCredit =
      this.opts.flow === "credit"
        ? new ConnectionCredit((bytes) => {
            if (this.conns.get(connectId) === conn) this.send(credit(connectId, bytes));
          }, AGENT_RECEIVE_WINDOW_BYTES)
        : undefined;
    const conn: EndpointConnection = new EndpointConnection(connectId, socket, this.side, log, flowCredit);
    this.conns.set(connectId, conn);
    this.opts.metrics.openEndpointConnections.inc();
    this.opts.metrics.dialDuration.observe(Number(process.hrtime.bigint() - p.startedAt) / 1e9);
    log.debug({ address: p.address }, "backend connected");
    // The answer and the connection's first credit in one write: the server reads them together
    // instead of waking twice, and the agent makes one TLS record and system call, not two.
    this.sink.together(() => {
      this.send(dialResponse(p.random, connectId));
      flowCredit?.openWindow();
    });
    this.emit("load", this.load);
  }

  /** The policy refused an address: nothing was dialed. Warn, since it may be someone probing. */
  private dialRefused(random: bigint, address: string, resolved: string, rule: string, reason: string): void {
    const err = new DestinationNotAllowedError(`dial tcp ${address}: ${DESTINATION_NOT_ALLOWED}: ${reason}`);
    this.opts.metrics.destinationRefusals.inc({ rule });
    this.opts.log.warn({ address, resolved, rule, code: err.code }, "dial refused by destination policy");
    this.send(dialResponse(random, 0n, err.message));
  }

  private dialFailed(random: bigint, address: string, error: string, reason: "timeout" | "unknown"): void {
    this.opts.metrics.endpointDialFailures.inc({ reason });
    // A refused or unreachable backend is the caller's problem, not the agent's: debug only.
    this.opts.log.debug({ address, error }, "backend dial failed");
    this.send(dialResponse(random, 0n, error));
  }

  /** DIAL_CLS: the server gave up on this dial; upstream sends nothing back. */
  private cancelDial(random: bigint): void {
    const pending = this.pending.get(random);
    if (!pending) return; // already answered; the server will CLOSE_REQ the connection if needed
    this.endPending(pending);
    pending.socket?.destroy(); // still resolving: the resolution's answer is dropped
  }

  private endPending(p: PendingDial): void {
    clearTimeout(p.timer);
    if (this.pending.delete(p.random)) this.emit("load", this.load);
  }

  private onCloseRequest(connectId: bigint): void {
    const conn = this.conns.get(connectId);
    if (!conn) {
      this.send(closeResponse(connectId, UNKNOWN_CONNECT_ID));
      return;
    }
    this.flushing.add(conn);
    conn.closeFromServer(() => this.flushing.delete(conn));
    // The answer is queued before the load drops: a listener that ends the stream once the load
    // is zero (a drained server's connection) must find it already written.
    this.send(closeResponse(connectId));
    this.forget(conn);
  }

  private onBackendClosed(conn: EndpointConnection, error: string): void {
    if (this.conns.get(conn.connectId) !== conn) return;
    this.send(closeResponse(conn.connectId, error));
    this.forget(conn);
  }

  private forget(conn: EndpointConnection): void {
    this.conns.delete(conn.connectId);
    this.opts.metrics.openEndpointConnections.dec();
    this.emit("load", this.load);
  }
}
