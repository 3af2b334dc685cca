/**
 * A PacketStream over one gRPC call on an HTTP/2 stream, server side: what GrpcFrontendSession
 * uses for ProxyService.Proxy, in place of a grpc-js call.
 *
 * Why not grpc-js here: grpc-js serializes each message into a buffer of its own and then
 * copies it into another with the 5-byte prefix, so every tunneled byte sent to a caller was
 * allocated and copied twice before HTTP/2 saw it; at 64 KiB per message those allocations
 * drove V8 into a mark-compact every ~40 ms (external memory pressure). Here a DATA packet is a
 * small header (prefix plus protobuf fields, lib/proto/codec.ts) written with the agent's own
 * buffer, never copied (packet-message.ts). Received messages come out as views of the HTTP/2
 * chunks when they fit in one (lib/proto/grpc-http2.ts).
 *
 * The call's end is the gRPC status in trailers: `end()` sends OK once everything written has
 * gone out; `fail(err)` sends the error's status instead; `destroy()` resets the stream.
 *
 * Delivery, pausing and backpressure are DecodingPacketStream's, as for kgw-tunnel/1; a paused
 * call stops reading, and HTTP/2 flow control then holds the caller back.
 */
import { constants, type ServerHttp2Stream } from "node:http2";
import { GatewayError, GrpcCode, grpcStatusFor, ProtocolError } from "../../errors.js";
import { decodePacket } from "../../proto/codec.js";
import { encodeGrpcMessage, GrpcMessageDecoder } from "../../proto/grpc-http2.js";
import type { Packet } from "../../proto/packet.js";
import { DecodingPacketStream } from "../decoding-packet-stream.js";
import type { PeerActivity } from "../http2-peer-watch.js";
import { grpcRefusalTrailers } from "../refusal-details.js";
import { writePacketMessage } from "./packet-message.js";

/** Bytes queued in the stream before `write` reports backpressure: one credit chunk and change. */
export const CALL_WRITE_HIGH_WATER_BYTES = 512 * 1024;

/**
 * How long a failed call's status may wait behind what was already written (the CLOSE_RSPs of
 * tunnels cut in the same moment, say) before the call is reset instead. A caller that reads
 * takes queued bytes within a round trip; one that does not would hold the status forever.
 */
export const FAIL_FLUSH_MS = 2_000;

export const GRPC_RESPONSE_HEADERS = {
  ":status": 200,
  "content-type": "application/grpc",
  "grpc-accept-encoding": "identity",
} as const;

export interface GrpcCallStreamOptions {
  maxMessageBytes: number;
  highWaterMark?: number;
  /** Custom metadata for the response headers (AgentService's serverID, serverCount). */
  metadata?: Readonly<Record<string, readonly string[]>> | undefined;
  /** Told of every write and read of the call (the session's peer watch, http2-peer-watch.ts). */
  activity?: PeerActivity | undefined;
  /** How long a failed call's status may wait behind queued bytes (default FAIL_FLUSH_MS). */
  failFlushMs?: number;
}

const NO_ACTIVITY: PeerActivity = { active: () => {}, pingSent: () => () => {} };

export class GrpcCallStream extends DecodingPacketStream {
  private readonly decoder: GrpcMessageDecoder;
  /** `details`: trailing metadata beside the status (a failure's, refusal-details.ts). */
  private status: { code: number; message: string; details?: Record<string, string> } = {
    code: GrpcCode.OK,
    message: "",
  };
  private readonly activity: PeerActivity;
  /** Armed by `fail` while the status waits behind queued bytes: resets the call if they stay. */
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly failFlushMs: number;

  constructor(
    private readonly stream: ServerHttp2Stream,
    opts: GrpcCallStreamOptions,
  ) {
    super(stream, opts.highWaterMark ?? CALL_WRITE_HIGH_WATER_BYTES);
    this.decoder = new GrpcMessageDecoder(opts.maxMessageBytes);
    this.activity = opts.activity ?? NO_ACTIVITY;
    this.failFlushMs = opts.failFlushMs ?? FAIL_FLUSH_MS;
    stream.respond({ ...opts.metadata, ...GRPC_RESPONSE_HEADERS }, { waitForTrailers: true });
    this.activity.active();
    stream.on("wantTrailers", () => {
      this.activity.active();
      const { code, message, details } = this.status;
      stream.sendTrailers(
        message
          ? { ...details, "grpc-status": String(code), "grpc-message": encodeGrpcMessage(message) }
          : { ...details, "grpc-status": String(code) },
      );
      // The call is over once its status is out. A caller still sending (we ended first: an
      // error, a deadline) is told to stop with RST_STREAM NO_ERROR, as grpc-go's server does.
      // In the next turn of the loop, once Node has sent the trailers: a reset submitted now
      // would go out ahead of them.
      if (!this.ended) setImmediate(() => stream.close(constants.NGHTTP2_NO_ERROR));
    });
    stream.on("data", (chunk: Buffer) => {
      // Once the call has failed, input is read and dropped: Node destroys a stream closed
      // with NO_ERROR only after its readable side has been consumed, so unread data would
      // keep a finished call (and its session) open.
      // Read: Node answers with WINDOW_UPDATEs by itself.
      this.activity.active();
      if (this.failed) return;
      this.decoder.push(chunk);
      this.flush();
    });
    stream.once("close", () => {
      // A caller that reset the call gets nothing more delivered: it would only start work
      // that is cancelled at once.
      if (stream.rstCode !== undefined && stream.rstCode !== constants.NGHTTP2_NO_ERROR) this.failed = true;
      clearTimeout(this.flushTimer);
      this.closed();
    });
  }

  write(packet: Packet, cb?: (err?: Error | null) => void): boolean {
    this.activity.active();
    writePacketMessage(this.stream, packet, cb);
    return this.accepted();
  }

  probe(answered: () => void): void {
    const session = this.stream.session;
    if (!session || session.closed) return;
    // The peer watch looks at the session only if this goes unanswered (an idle agent's
    // periodic probe costs it nothing).
    const watched = this.activity.pingSent();
    try {
      // Node answers a PING from its own read loop; the ack proves the peer's process runs.
      session.ping((err) => {
        watched(!err);
        if (!err) answered();
      });
    } catch {
      // Too many PINGs outstanding, or the session is closing: no answer is the answer.
      watched(false);
    }
  }

  /** Ends the call with status OK, after everything written. */
  end(): void {
    this.activity.active();
    if (!this.stream.writableEnded) this.stream.end();
  }

  /**
   * Ends the call with `err`'s gRPC status, after what was already written, and stops
   * delivering. The status is the caller's only way to tell why (a revoked credential must read
   * as UNAUTHENTICATED, not as a cancelled call it would retry), so bytes still queued (packets
   * written in the same moment) go out ahead of it; only if they are still queued after
   * FAIL_FLUSH_MS (a caller not reading) is the call reset instead.
   */
  fail(err: Error): void {
    this.activity.active();
    this.failed = true;
    this.stream.resume(); // drain and drop what the caller still sends (see the "data" handler)
    if (this.stream.writableEnded || this.stream.destroyed) return;
    const code = grpcStatusFor(err);
    // A typed failure (a revoked credential, a deadline) says the same in the status details as
    // a call refused at its start does: code, rule or quota (refusal-details.ts).
    const details = err instanceof GatewayError ? grpcRefusalTrailers(code, err) : undefined;
    this.status = { code, message: err.message, ...(details ? { details } : {}) };
    this.stream.end();
    if (this.stream.writableLength > 0) {
      this.flushTimer = setTimeout(() => this.destroy(), this.failFlushMs);
      this.flushTimer.unref();
    }
  }

  /** Resets the stream (RST_STREAM CANCEL): the caller sees the call cancelled. */
  destroy(_err?: Error): void {
    this.activity.active();
    this.failed = true;
    clearTimeout(this.flushTimer);
    if (this.stream.destroyed) return;
    // A stream already closed (reset by either side) may still wait for its readable side to
    // be consumed before Node destroys it; close() does nothing then.
    if (this.stream.closed) this.stream.destroy();
    else this.stream.close(constants.NGHTTP2_CANCEL);
  }

  protected get pendingBytes(): number {
    return this.decoder.pendingBytes;
  }

  protected nextPacket(): Packet | null {
    const message = this.decoder.next();
    return message === null ? null : decodePacket(message);
  }

  protected malformed(err: Error): void {
    this.fail(err);
  }

  protected endedMidFrame(): void {
    this.fail(new ProtocolError("the call ended in the middle of a message"));
  }
}
