/**
 * One ProxyService.Proxy stream from a caller (kube-apiserver via konnectivity-client).
 *
 * The caller's randoms and connectIDs are scoped to this stream: we answer DIAL_REQ with a
 * connectID we assign here, so a caller can only ever address its own connections, and several
 * dials on one stream (allowed by the protocol) may go to different agents without clashing.
 */

import { DialCancelledError, type GatewayError, isRefusal, toGatewayError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import {
  closeResponse,
  dataPacket,
  dialResponse,
  type Packet,
  PacketType,
  packetTypeName,
} from "../../proto/packet.js";
import { peerCloseKind } from "../../transport/peer-close.js";
import { dialErrorText, refusalDetails } from "../../transport/refusal-details.js";
import type { BackendLink, DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import { PacketSink } from "../../tunnel/packet-sink.js";
import type { PacketStream } from "../../tunnel/packet-stream.js";
import { PauseLatch } from "../../tunnel/pause-latch.js";
import type { CallerDialer } from "./dial-context.js";

interface StreamConnection {
  /** Our connectID towards the caller; 0n while the dial is pending. */
  connectId: bigint;
  random: bigint;
  handle: DialHandle | null;
  link: BackendLink | null;
}

export class GrpcFrontendSession {
  private nextConnectId = 1n;
  private readonly dials = new Map<bigint, StreamConnection>();
  private readonly conns = new Map<bigint, StreamConnection>();
  private readonly sink: PacketSink;
  private readonly readLatch: PauseLatch;
  private done = false;

  constructor(
    private readonly stream: PacketStream,
    private readonly dialer: CallerDialer,
    private readonly log: Logger,
    private readonly metrics: ServerMetrics,
  ) {
    this.sink = new PacketSink(stream);
    this.readLatch = new PauseLatch(stream);
    stream.on("data", (packet: Packet) => this.onPacket(packet));
    stream.on("error", (err: Error) => {
      // A caller that closed or reset its connection is a normal end (lib/transport/peer-close.ts).
      if (!peerCloseKind(err)) log.debug({ err: err.message }, "frontend stream error");
    });
    stream.once("end", () => this.finish(true));
    stream.once("close", () => this.finish(false));
  }

  private send(packet: Packet, written?: () => void): boolean {
    this.metrics.streamPackets.count("to_client", packet);
    return this.sink.send(packet, written);
  }

  private onPacket(packet: Packet): void {
    this.metrics.streamPackets.count("from_client", packet);
    switch (packet.type) {
      case PacketType.DIAL_REQ:
        this.onDial(packet.random, { protocol: packet.protocol || "tcp", address: packet.address });
        return;
      case PacketType.DATA: {
        const conn = this.conns.get(packet.connectId);
        if (!conn?.link) {
          this.send(closeResponse(packet.connectId, `unknown connectID ${packet.connectId}`));
          return;
        }
        if (!conn.link.send(packet.data)) {
          this.readLatch.block(conn);
          conn.link.onceWritable(() => this.readLatch.unblock(conn));
        }
        return;
      }
      case PacketType.CLOSE_REQ: {
        const conn = this.conns.get(packet.connectId);
        if (!conn?.link) {
          this.send(closeResponse(packet.connectId, `unknown connectID ${packet.connectId}`));
          return;
        }
        this.drop(conn);
        conn.link.close();
        this.send(closeResponse(packet.connectId));
        return;
      }
      case PacketType.DIAL_CLS: {
        const conn = this.dials.get(packet.random);
        if (!conn) return;
        this.dials.delete(packet.random);
        conn.handle?.cancel();
        return;
      }
      default:
        this.log.warn({ packetType: packetTypeName(packet) }, "ignoring unexpected packet from frontend");
    }
  }

  private onDial(random: bigint, req: DialRequest): void {
    if (this.dials.has(random)) {
      this.send(dialResponse(random, 0n, "duplicate dial random on this stream"));
      return;
    }
    const conn: StreamConnection = { connectId: 0n, random, handle: null, link: null };
    this.dials.set(random, conn);
    try {
      conn.handle = this.dialer(req, this.frontendEnd(conn));
    } catch (err) {
      this.dialFailed(conn, toGatewayError(err));
    }
  }

  private dialFailed(conn: StreamConnection, err: GatewayError): void {
    if (this.dials.get(conn.random) !== conn) return;
    this.dials.delete(conn.random);
    // A refusal (credential, policy, quota) is counted and audited; only failures are news.
    const { rule, quota, limit } = refusalDetails(err);
    const fields = {
      err: err.message,
      code: err.code,
      ...(rule !== undefined ? { rule } : {}),
      ...(quota !== undefined ? { quota, limit } : {}),
    };
    if (isRefusal(err)) this.log.debug(fields, "dial refused");
    else this.log.info(fields, "dial failed");
    // The message first, unchanged (upstream clients may match it), then code, rule or quota.
    this.send(dialResponse(conn.random, 0n, dialErrorText(err)));
  }

  private frontendEnd(conn: StreamConnection): FrontendEnd {
    return {
      established: (link) => {
        if (this.dials.get(conn.random) !== conn || this.done) {
          link.close(); // the caller cancelled while the answer was in flight
          return;
        }
        this.dials.delete(conn.random);
        conn.connectId = this.nextConnectId++;
        conn.link = link;
        this.conns.set(conn.connectId, conn);
        this.send(dialResponse(conn.random, conn.connectId));
      },
      dialFailed: (err) => this.dialFailed(conn, err),
      deliver: (data, flushed) => this.send(dataPacket(conn.connectId, data), flushed),
      onceWritable: (cb) => this.sink.onceWritable(cb),
      closed: (err) => {
        if (this.conns.get(conn.connectId) !== conn) return;
        this.drop(conn);
        this.send(closeResponse(conn.connectId, err?.message ?? ""));
      },
    };
  }

  private drop(conn: StreamConnection): void {
    this.conns.delete(conn.connectId);
    this.readLatch.unblock(conn);
  }

  /** The caller ended the stream (`graceful`) or it broke: release everything it held. */
  private finish(graceful: boolean): void {
    if (this.done) return;
    this.done = true;
    for (const conn of this.dials.values()) conn.handle?.cancel();
    this.dials.clear();
    for (const conn of this.conns.values()) conn.link?.close();
    this.conns.clear();
    if (graceful && !this.stream.writableEnded) this.stream.end();
  }

  /**
   * Closes the stream from our side (shutdown, a revoked credential). The caller is told why in
   * the call's status where the transport has one: a revoked credential must read as
   * UNAUTHENTICATED, not as a cancelled call a client would retry.
   */
  abort(reason: GatewayError = new DialCancelledError("server shutting down")): void {
    this.log.debug({ reason: reason.message }, "closing frontend stream");
    this.finish(false);
    if (this.stream.fail) this.stream.fail(reason);
    else this.stream.destroy();
  }
}
