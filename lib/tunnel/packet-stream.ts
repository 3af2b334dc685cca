import type { Packet } from "../proto/packet.js";

/**
 * What the tunnel core needs from a bidirectional packet stream: grpc-js server and client
 * duplex calls satisfy it, as do FramedPacketStream (kgw-tunnel/1), GrpcCallStream (the
 * frontend's gRPC calls) and an object-mode PassThrough pair in tests.
 */
export interface PacketStream {
  write(packet: Packet, cb?: (err?: Error | null) => void): boolean;
  end(): unknown;
  destroy(err?: Error): unknown;
  /**
   * Ends the stream with `err` as its status, where the transport carries one (a gRPC call's
   * grpc-status), so the peer learns why; absent elsewhere, where `destroy` is the way to close.
   */
  fail?(err: Error): unknown;
  pause(): unknown;
  resume(): unknown;
  readonly writableNeedDrain: boolean;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
  /**
   * Asks the peer for a sign of life below the packet layer (an HTTP/2 PING, a kgw-tunnel/1
   * PING), which a live peer answers however busy or paused its packets are. `answered` runs at
   * most once, when the peer answers; never when it does not. Absent where the transport cannot
   * ask (grpc-js calls): liveness then rests on packets alone.
   */
  probe?(answered: () => void): void;
  /**
   * Runs `writes` (calls to `write`) and hands what they wrote to the transport in one write:
   * one TLS record and one system call instead of one per packet, and one read for the peer.
   * Order and timing are unchanged: everything leaves before `batch` returns. Absent where the
   * transport frames each message itself (grpc-js calls): callers then just run `writes`.
   */
  batch?(writes: () => void): void;
  on(event: "data", listener: (packet: Packet) => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  on(event: "drain" | "end" | "close", listener: () => void): unknown;
  once(event: "drain" | "end" | "close", listener: () => void): unknown;
}
