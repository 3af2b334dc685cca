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
  pause(): unknown;
  resume(): unknown;
  readonly writableNeedDrain: boolean;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
  on(event: "data", listener: (packet: Packet) => void): unknown;
  on(event: "error", listener: (err: Error) => void): unknown;
  on(event: "drain" | "end" | "close", listener: () => void): unknown;
  once(event: "drain" | "end" | "close", listener: () => void): unknown;
}
