/**
 * A PacketStream over one kgw-tunnel/1 socket (lib/proto/tunnel-frames.ts), after the handshake.
 * AgentSession and BackendDialer use it exactly as they use a gRPC call.
 *
 * Why it exists: on gRPC every tunneled byte is copied into a protobuf, framed by grpc-js,
 * framed again by HTTP/2 in 16 KiB frames under two flow-control windows, and read by a native
 * HTTP/2 session that can miss a dead peer (see docs/DESIGN.md). Here DATA goes to the socket as
 * a 13-byte header plus the backend's own buffer, the socket is read from JavaScript so EOF and
 * errors are seen at once, and the only windows are TCP's and our per-connection credit.
 *
 * Delivery, pausing and backpressure are DecodingPacketStream's: `write` returns false once more
 * than `highWaterMark` bytes wait in the socket, "drain" follows when it has flushed; `pause`
 * stops delivering at once, even in the middle of a received chunk, and stops reading.
 *
 * Keepalive: when nothing has been received for `keepaliveMs`, a PING goes out; if nothing at
 * all arrives within `keepaliveTimeoutMs` after it, the peer is declared dead and the socket is
 * destroyed. While paused the stream is not reading, so silence then proves nothing and is not
 * held against the peer.
 */
import type { Socket } from "node:net";
import { ProtocolError } from "../errors.js";
import { decodePacket, encodePacket } from "../proto/codec.js";
import { dataPacket, type Packet, PacketType } from "../proto/packet.js";
import {
  encodeDataHeader,
  encodeFrame,
  type FrameDecoder,
  FrameType,
  PING_PAYLOAD_BYTES,
} from "../proto/tunnel-frames.js";
import { DecodingPacketStream } from "./decoding-packet-stream.js";

/** Bytes queued in the socket before `write` reports backpressure: one credit chunk and change. */
export const TUNNEL_WRITE_HIGH_WATER_BYTES = 512 * 1024;

export interface FramedPacketStreamOptions {
  /** Idle time before a PING; 0 disables keepalive. */
  keepaliveMs: number;
  /** How long a PING may go unanswered (by anything) before the peer is declared dead. */
  keepaliveTimeoutMs: number;
  highWaterMark?: number;
}

/** The peer stopped answering keepalive pings. */
export class KeepaliveTimeoutError extends ProtocolError {
  constructor(ms: number) {
    super(`peer sent nothing for ${ms}ms after a keepalive ping`);
  }
}

export class FramedPacketStream extends DecodingPacketStream {
  private lastReceived = Date.now();
  private pingSentAt = 0;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  /** Waiting for a sign of life from the peer (see `probe`). */
  private probes: Array<() => void> = [];

  constructor(
    private readonly socket: Socket,
    /** Holds whatever arrived after the handshake frame. */
    private readonly decoder: FrameDecoder,
    private readonly opts: FramedPacketStreamOptions,
  ) {
    super(socket, opts.highWaterMark ?? TUNNEL_WRITE_HIGH_WATER_BYTES);
    socket.on("data", (chunk: Buffer) => {
      this.lastReceived = Date.now();
      this.pingSentAt = 0;
      if (this.probes.length > 0) this.answerProbes();
      this.decoder.push(chunk);
      this.flush();
    });
    socket.once("close", () => {
      clearTimeout(this.keepaliveTimer);
      this.probes = [];
      this.closed();
    });
    this.scheduleKeepalive();
  }

  write(packet: Packet, cb?: (err?: Error | null) => void): boolean {
    const s = this.socket;
    if (packet.type === PacketType.DATA && packet.error === "") {
      // Header and bytes in one writev; the bytes are the caller's buffer, not a copy.
      s.cork();
      s.write(encodeDataHeader(packet.connectId, packet.data.byteLength));
      s.write(packet.data, cb);
      s.uncork();
    } else {
      s.write(encodeFrame(FrameType.PACKET, encodePacket(packet)), cb);
    }
    return this.accepted();
  }

  batch(writes: () => void): void {
    this.socket.cork();
    try {
      writes();
    } finally {
      this.socket.uncork();
    }
  }

  end(): void {
    this.socket.end();
  }

  /** A PING; anything the peer sends after it answers (a PONG may queue behind its data). */
  probe(answered: () => void): void {
    if (!this.socket.writable) return;
    this.probes.push(answered);
    if (this.probes.length === 1)
      this.socket.write(encodeFrame(FrameType.PING, Buffer.alloc(PING_PAYLOAD_BYTES)));
  }

  private answerProbes(): void {
    const waiting = this.probes;
    this.probes = [];
    for (const answered of waiting) answered();
  }

  destroy(err?: Error): void {
    this.failed = true;
    this.socket.destroy(err);
  }

  override resume(): void {
    // Silence while paused proved nothing about the peer (we were not reading).
    if (this.paused) this.lastReceived = Date.now();
    super.resume();
  }

  protected get pendingBytes(): number {
    return this.decoder.pendingBytes;
  }

  protected nextPacket(): Packet | null {
    for (;;) {
      const frame = this.decoder.next();
      if (frame === null) return null;
      if (frame.kind === "data") return dataPacket(frame.connectId, frame.data);
      switch (frame.type) {
        case FrameType.PACKET:
          return decodePacket(frame.payload);
        case FrameType.PING:
          if (this.socket.writable) this.socket.write(encodeFrame(FrameType.PONG, frame.payload));
          break;
        case FrameType.PONG:
          break; // receiving it already counted as life
        default:
          throw new ProtocolError(`handshake frame type ${frame.type} after the handshake`);
      }
    }
  }

  protected malformed(err: Error): void {
    this.destroy(err);
  }

  protected endedMidFrame(): void {
    // A FIN inside a frame: no "end" (the stream was cut short); "close" follows.
  }

  private scheduleKeepalive(): void {
    const { keepaliveMs, keepaliveTimeoutMs } = this.opts;
    if (keepaliveMs <= 0) return;
    const wait = this.pingSentAt
      ? keepaliveTimeoutMs - (Date.now() - this.pingSentAt)
      : keepaliveMs - (Date.now() - this.lastReceived);
    this.keepaliveTimer = setTimeout(() => this.checkKeepalive(), Math.max(1, wait));
    this.keepaliveTimer.unref();
  }

  private checkKeepalive(): void {
    if (this.socket.destroyed) return;
    const now = Date.now();
    if (this.paused) {
      this.lastReceived = now;
      this.pingSentAt = 0;
    } else if (this.pingSentAt && now - this.pingSentAt >= this.opts.keepaliveTimeoutMs) {
      this.socket.destroy(new KeepaliveTimeoutError(this.opts.keepaliveTimeoutMs));
      return;
    } else if (!this.pingSentAt && now - this.lastReceived >= this.opts.keepaliveMs) {
      this.pingSentAt = now;
      this.socket.write(encodeFrame(FrameType.PING, Buffer.alloc(PING_PAYLOAD_BYTES)));
    }
    this.scheduleKeepalive();
  }
}
