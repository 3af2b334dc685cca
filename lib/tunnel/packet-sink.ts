import type { Packet } from "../proto/packet.js";
import type { PacketStream } from "./packet-stream.js";

/**
 * The writing side of one packet stream (an agent stream or a frontend stream) that several
 * tunneled connections share. `send` reports backpressure; a producer that got `false` parks a
 * callback with `onceWritable` and stops reading its own source until the stream drains. At most
 * one parked callback per connection, so the waiter set is bounded by the connection count.
 */
export class PacketSink {
  private readonly waiters = new Set<() => void>();
  private closed = false;

  constructor(private readonly stream: PacketStream) {
    stream.on("drain", () => this.release());
    stream.once("close", () => {
      this.closed = true;
      // Wake producers so they notice the closed stream instead of waiting forever.
      this.release();
    });
  }

  /**
   * Writes a packet; `false` means the stream is over its high-water mark. `written` runs once
   * the stream has taken the packet off its buffer (never, if the stream closes first).
   */
  send(packet: Packet, written?: () => void): boolean {
    if (this.closed || this.stream.writableEnded || this.stream.destroyed) return false;
    return written ? this.stream.write(packet, (err) => err || written()) : this.stream.write(packet);
  }

  /** Runs `sends` (calls to `send`); what they write leaves together where the stream can (PacketStream.batch). */
  together(sends: () => void): void {
    if (this.stream.batch) this.stream.batch(sends);
    else sends();
  }

  /** Runs `cb` once the stream can take more (or is closed). */
  onceWritable(cb: () => void): void {
    if (this.closed || !this.stream.writableNeedDrain) {
      queueMicrotask(cb);
      return;
    }
    this.waiters.add(cb);
  }

  get isClosed(): boolean {
    return this.closed;
  }

  private release(): void {
    if (this.waiters.size === 0) return;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const cb of waiters) cb();
  }
}
