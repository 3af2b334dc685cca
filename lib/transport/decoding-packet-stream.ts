/**
 * What FramedPacketStream (kgw-tunnel/1 on a socket) and GrpcCallStream (a gRPC call on an
 * HTTP/2 stream) share: a PacketStream over a byte stream whose chunks a decoder turns into
 * packets. The subclass feeds its decoder from the source's "data" and says how to get the next
 * packet; this class owns delivery, pausing, backpressure and the end of the stream:
 *
 * - Nothing is read until the owner listens for packets (as a Readable starts flowing on its
 *   first "data" listener): the owner may attach only after a few awaits, and packets that came
 *   early must not be emitted to nobody.
 * - `pause` stops delivering at once, even between packets of one chunk (the rest stays in the
 *   decoder), and stops reading the source; `resume` delivers what was held, then reads again.
 * - `write` (the subclass's) reports backpressure through `accepted()`: false once more than
 *   `highWaterMark` bytes wait in the source, and "drain" follows when it has flushed.
 * - "end" comes once everything the peer sent before its end has been delivered; on "close",
 *   packets still held back are delivered first, as a gRPC call would, unless the stream failed.
 */
import { EventEmitter } from "node:events";
import type { Duplex } from "node:stream";
import type { Packet } from "../proto/packet.js";
import type { PacketStream } from "../tunnel/packet-stream.js";

export abstract class DecodingPacketStream extends EventEmitter implements PacketStream {
  protected paused = false;
  /** Nothing more is delivered: destroyed, failed, or reset. */
  protected failed = false;
  /** The peer ended its side; "end" is emitted once everything before it has been delivered. */
  protected ended = false;
  private endEmitted = false;
  private needDrain = false;

  constructor(
    private readonly source: Duplex,
    private readonly highWaterMark: number,
  ) {
    super();
    source.pause(); // until the owner listens (below)
    source.on("drain", () => {
      if (!this.needDrain) return;
      this.needDrain = false;
      this.emit("drain");
    });
    source.once("end", () => {
      this.ended = true;
      this.flush();
    });
    source.on("error", (err) => {
      this.failed = true;
      this.emit("error", err);
    });
    const start = (event: string | symbol) => {
      if (event !== "data") return;
      this.off("newListener", start);
      queueMicrotask(() => {
        this.flush();
        if (!this.paused && !this.source.destroyed) this.source.resume();
      });
    };
    this.on("newListener", start);
  }

  /** The next decoded packet, or null until more input arrives. Throws on malformed input. */
  protected abstract nextPacket(): Packet | null;
  /** Input received and not yet decoded. */
  protected abstract get pendingBytes(): number;
  /** The decoder threw `err`: the input can no longer be trusted. */
  protected abstract malformed(err: Error): void;
  /** The peer ended in the middle of a frame. */
  protected abstract endedMidFrame(): void;

  abstract write(packet: Packet, cb?: (err?: Error | null) => void): boolean;
  abstract end(): void;
  abstract destroy(err?: Error): void;

  get writableNeedDrain(): boolean {
    return this.needDrain;
  }

  get writableEnded(): boolean {
    return this.source.writableEnded;
  }

  get destroyed(): boolean {
    return this.source.destroyed;
  }

  pause(): void {
    if (this.paused) return;
    this.paused = true;
    if (!this.failed) this.source.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.flush();
    // A failed stream keeps reading: its input is dropped, never held.
    if ((!this.paused || this.failed) && !this.source.destroyed) this.source.resume();
  }

  /** For the subclass's write: whether the source still takes more without backpressure. */
  protected accepted(): boolean {
    if (this.source.writableLength < this.highWaterMark) return true;
    this.needDrain = true;
    return false;
  }

  /** For the subclass's "close" listener: held packets go out, then "close". */
  protected closed(): void {
    this.paused = false;
    this.flush();
    this.emit("close");
  }

  /** Delivers decoded packets until the decoder runs dry or the owner pauses us. */
  protected flush(): void {
    try {
      while (!this.paused && !this.failed) {
        const packet = this.nextPacket();
        if (packet === null) break;
        this.emit("data", packet);
      }
    } catch (err) {
      this.malformed(err as Error);
      return;
    }
    if (!this.ended || this.endEmitted || this.paused || this.failed) return;
    if (this.pendingBytes > 0) {
      this.endedMidFrame();
      return;
    }
    this.endEmitted = true;
    this.emit("end");
  }
}
