/**
 * What a transport hands the agent once the server has accepted a stream: the packet stream, the
 * server's response headers, and the transport's own lifecycle. ServerConnection is written
 * against this, so it does not care whether gRPC or kgw-tunnel/1 carries the packets.
 */

import type { HeaderMap } from "../../transport/tunnel-handshake.js";
import type { PacketStream } from "../../tunnel/packet-stream.js";

export interface StreamEnd {
  reason: string;
  /** Set when the stream failed (as opposed to ending or being closed by us). */
  error?: Error;
  /** The gRPC status code, when the server or the transport gave one. */
  code?: number;
}

export interface OpenedStream {
  readonly transport: "grpc" | "tunnel";
  readonly stream: PacketStream;
  readonly headers: HeaderMap;
  /** Called once when the stream is over, for whatever reason. */
  onEnd(listener: (end: StreamEnd) => void): void;
  /** A reason when the transport under the stream is known to be broken; null while healthy. */
  brokenReason(): string | null;
  /** Releases the stream and its connection. Idempotent. */
  close(): void;
}

/** Request metadata, as a header map (the same names on both transports). */
export type { HeaderMap };
