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
 * Backpressure: `write` returns false once more than `highWaterMark` bytes wait in the socket;
 * "drain" follows when the socket has flushed. `pause` stops delivering packets at once, even in
 * the middle of a received chunk (the rest stays in the decoder), and stops reading the socket.
 *
 * Keepalive: when nothing has been received for `keepaliveMs`, a PING goes out; if nothing at
 * all arrives within `keepaliveTimeoutMs` after it, the peer is declared dead and the socket is
 * destroyed. While paused the stream is not reading, so silence then proves nothing and is not
 * held against the peer.
 */
import { EventEmitter } from "node:events";
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
import type { PacketStream } from "../tunnel/packet-stream.js";

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

export class FramedPacketStream extends EventEmitter implements PacketStream {
  private paused = false;
  private needDrain = false;
  /** The peer sent its FIN; "end" is emitted once everything before it has been delivered. */
  private ended = false;
  private endEmitted = false;
  /** Destroyed by us, by the owner, or by an error: nothing more is delivered. */
  private failed = false;
  private lastReceived = Date.now();
  private pingSentAt = 0;
  private keepaliveTimer: NodeJS.Timeout | undefined;
  private readonly highWaterMark: number;

  constructor(
    private readonly socket: Socket,
    /** Holds whatever arrived after the handshake frame. */
    private readonly decoder: FrameDecoder,
    private readonly opts: FramedPacketStreamOptions,
  ) {
    super();
    this.highWaterMark = opts.highWaterMark ?? TUNNEL_WRITE_HIGH_WATER_BYTES;
    socket.pause(); // until the owner listens (below)
    socket.on("data", (chunk: Buffer) => this.onChunk(chunk));
    socket.on("drain", () => {
      if (!this.needDrain) return;
      this.needDrain = false;
      this.emit("drain");
    });
    socket.once("end", () => {
      this.ended = true;
      this.flush();
    });
    socket.on("error", (err) => {
      this.failed = true;
      this.emit("error", err);
    });
    socket.once("close", () => {
      clearTimeout(this.keepaliveTimer);
      // A clean close may leave packets we were asked to hold (paused); nobody can push back
      // any more, so they are delivered now, before "end" and "close", as a gRPC call would.
      this.paused = false;
      this.flush();
      this.emit("close");
    });
    this.scheduleKeepalive();
    // Nothing is read until the owner listens for packets (as a Readable starts flowing on its
    // first "data" listener): the owner may attach only after a few awaits, and frames that came
    // with the handshake, or a DIAL_REQ right behind WELCOME, must not be emitted to nobody.
    const start = (event: string | symbol) => {
      if (event !== "data") return;
      this.off("newListener", start);
      queueMicrotask(() => {
        this.flush();
        if (!this.paused && !this.socket.destroyed) this.socket.resume();
      });
    };
    this.on("newListener", start);
  }

  get writableNeedDrain(): boolean {
    return this.needDrain;
  }

  get writableEnded(): boolean {
    return this.socket.writableEnded;
  }

  get destroyed(): boolean {
    return this.socket.destroyed;
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
    if (s.writableLength < this.highWaterMark) return true;
    this.needDrain = true;
    return false;
  }

  end(): void {
    this.socket.end();
  }

  destroy(err?: Error): void {
    this.failed = true;
    this.socket.destroy(err);
  }

  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.lastReceived = Date.now();
    this.flush();
    if (!this.paused && !this.socket.destroyed) this.socket.resume();
  }

  private onChunk(chunk: Buffer): void {
    this.lastReceived = Date.now();
    this.pingSentAt = 0;
    this.decoder.push(chunk);
    this.flush();
  }

  /** Delivers decoded packets until the decoder runs dry or the owner pauses us. */
  private flush(): void {
    try {
      while (!this.paused && !this.failed) {
        const frame = this.decoder.next();
        if (frame === null) break;
        if (frame.kind === "data") {
          this.emit("data", dataPacket(frame.connectId, frame.data));
          continue;
        }
        switch (frame.type) {
          case FrameType.PACKET:
            this.emit("data", decodePacket(frame.payload));
            break;
          case FrameType.PING:
            if (this.socket.writable) this.socket.write(encodeFrame(FrameType.PONG, frame.payload));
            break;
          case FrameType.PONG:
            break; // receiving it already counted as life
          default:
            throw new ProtocolError(`handshake frame type ${frame.type} after the handshake`);
        }
      }
    } catch (err) {
      this.destroy(err as Error);
      return;
    }
    if (this.ended && !this.endEmitted && !this.paused && this.decoder.pendingBytes === 0) {
      this.endEmitted = true;
      this.emit("end");
    }
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
