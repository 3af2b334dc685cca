/**
 * kgw-tunnel/1: the framing our agent and our server speak when both ends are ours, selected by
 * ALPN on the agent port (upstream peers only ever offer `h2` and get gRPC, unchanged).
 *
 * It carries exactly the upstream packets, without HTTP/2 and gRPC underneath: the same
 * AgentService metadata and the same `Packet` protobufs, plus a raw DATA frame so that tunneled
 * bytes travel without being copied into a protobuf and then again into gRPC and HTTP/2 frames.
 * Per-connection flow control is the credit scheme of lib/tunnel/flow-control.ts, as on gRPC;
 * there is no stream-level window, so one agent's throughput is bounded by TCP alone.
 *
 * Every frame: type (u8), payload length (u32, big-endian), payload.
 *
 *   HELLO    agent → server, first frame: JSON {"metadata": {name: [values]}}
 *   WELCOME  server → agent, first frame: JSON {"headers": {name: [values]}}
 *   REFUSED  server → agent, instead of WELCOME: JSON {"code": gRPC status, "message": text};
 *            the server then closes the connection
 *   PACKET   a protobuf `Packet` (lib/proto/codec.ts): every packet type but DATA
 *   DATA     connectID (u64, big-endian), then the bytes; a DATA packet with no error
 *   PING     8 opaque bytes; the receiver answers PONG with the same bytes (keepalive)
 *   PONG
 *
 * Nothing here touches a socket: the decoder is fed chunks and yields frames, and is tested
 * with plain buffers.
 */
import { ProtocolError } from "../errors.js";
import { ChunkQueue } from "./chunk-queue.js";

export const TUNNEL_ALPN = "kgw-tunnel/1";

export const FrameType = {
  HELLO: 1,
  WELCOME: 2,
  REFUSED: 3,
  PACKET: 4,
  DATA: 5,
  PING: 6,
  PONG: 7,
} as const;
export type FrameType = (typeof FrameType)[keyof typeof FrameType];

export const FRAME_HEADER_BYTES = 5;
/** DATA header: frame header plus the connectID. */
export const DATA_HEADER_BYTES = FRAME_HEADER_BYTES + 8;
export const PING_PAYLOAD_BYTES = 8;

/**
 * Largest payload per frame type. Handshake frames carry a few headers (a service-account token
 * is the largest, ~1–2 KiB); packets are small; a DATA frame is at most one credit chunk
 * (MAX_DATA_PACKET_BYTES, 256 KiB) but we accept up to 1 MiB from a newer peer. Anything larger
 * is a broken or hostile peer: the connection is closed before buffering it.
 */
export const MAX_HANDSHAKE_FRAME_BYTES = 16 * 1024;
export const MAX_PACKET_FRAME_BYTES = 64 * 1024;
export const MAX_DATA_FRAME_BYTES = 8 + 1024 * 1024;

/**
 * In "joined" mode (the server's), DATA bytes are handed out in slices of this much (or the rest
 * of the frame, if less), not as each socket read brings them. A TLS socket delivers at most one
 * 16 KiB record per read, so a 64 KiB frame used to come out as five packets, and every packet
 * costs its own gRPC message, HTTP/2 frame and bookkeeping downstream: a grpc-js server spent
 * 2.3–2.7 ms of CPU per MB sending 13 KiB messages against 1.5 for 64 KiB ones. Joining the
 * pieces is one copy (about 0.1 ms per MB); a slice waits at most for 64 KiB that the peer
 * already sent.
 */
export const DATA_SLICE_BYTES = 64 * 1024;

/**
 * How a FrameDecoder hands out DATA bytes:
 * - "joined": slices of DATA_SLICE_BYTES, one copy where a slice spans received chunks. For a
 *   receiver whose every packet has a cost of its own downstream (the server: a gRPC message
 *   to a caller, a TLS record to a CONNECT caller).
 * - "views": whatever part of the frame each received chunk holds, never copied. For a receiver
 *   that writes the bytes to a plain socket (the agent: a backend). Every DATA frame of 16 KiB
 *   spans two TLS records (its 13-byte header pushes it over), so joined slices cost the agent a
 *   fresh 16 KiB buffer per 16 KiB uploaded, and V8 counts every such buffer as external memory:
 *   at 100–200 MB/s that alone set off a mark-compact every 10–15 MB moved.
 */
export type DataSlicing = "joined" | "views";

const MAX_PAYLOAD: Record<number, number> = {
  [FrameType.HELLO]: MAX_HANDSHAKE_FRAME_BYTES,
  [FrameType.WELCOME]: MAX_HANDSHAKE_FRAME_BYTES,
  [FrameType.REFUSED]: MAX_HANDSHAKE_FRAME_BYTES,
  [FrameType.PACKET]: MAX_PACKET_FRAME_BYTES,
  [FrameType.DATA]: MAX_DATA_FRAME_BYTES,
  [FrameType.PING]: PING_PAYLOAD_BYTES,
  [FrameType.PONG]: PING_PAYLOAD_BYTES,
};

/** A whole frame, payload contiguous (every type but DATA). */
export interface ControlFrame {
  kind: "frame";
  type: Exclude<FrameType, typeof FrameType.DATA>;
  payload: Buffer;
}

/**
 * Part of a DATA frame's bytes: a view into the received chunk when they lie in one, else (in
 * "joined" mode only) one copy. A frame may come out as several slices; each is a valid DATA
 * packet for its connection.
 */
export interface DataSlice {
  kind: "data";
  connectId: bigint;
  data: Buffer;
}

export type DecodedFrame = ControlFrame | DataSlice;

/** One whole frame (small payloads: handshake, packets, pings). */
export function encodeFrame(type: FrameType, payload: Uint8Array): Buffer {
  const out = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.byteLength);
  out[0] = type;
  out.writeUInt32BE(payload.byteLength, 1);
  out.set(payload, FRAME_HEADER_BYTES);
  return out;
}

/** The header of a DATA frame; the bytes follow it on the wire as they are. */
export function encodeDataHeader(connectId: bigint, dataBytes: number): Buffer {
  const out = Buffer.allocUnsafe(DATA_HEADER_BYTES);
  out[0] = FrameType.DATA;
  out.writeUInt32BE(8 + dataBytes, 1);
  out.writeBigUInt64BE(BigInt.asUintN(64, connectId), FRAME_HEADER_BYTES);
  return out;
}

/**
 * Incremental decoder. `push` a received chunk, then call `next` until it returns null. Memory
 * is bounded: DATA bytes are buffered only up to DATA_SLICE_BYTES ("views": not beyond the chunk
 * they came in), and a control frame only up to its type's maximum size. Malformed input throws
 * ProtocolError; the caller closes the connection (the stream is unusable once its framing is
 * lost).
 */
export class FrameDecoder {
  private readonly queue = new ChunkQueue();
  /** The DATA frame being streamed out: its connection and bytes still to come. */
  private dataLeft = 0;
  private dataConnectId = 0n;

  constructor(private readonly slicing: DataSlicing = "joined") {}

  /** Bytes received and not yet handed out. */
  get pendingBytes(): number {
    return this.queue.length;
  }

  push(chunk: Buffer): void {
    this.queue.push(chunk);
  }

  next(): DecodedFrame | null {
    const q = this.queue;
    if (this.dataLeft > 0) return this.nextDataSlice();
    if (q.length < FRAME_HEADER_BYTES) return null;
    const header = q.peek(FRAME_HEADER_BYTES);
    const type = header[0]!;
    const length = header.readUInt32BE(1);
    const max = MAX_PAYLOAD[type];
    if (max === undefined) throw new ProtocolError(`unknown tunnel frame type ${type}`);
    if (length > max) {
      throw new ProtocolError(`tunnel frame type ${type} of ${length} bytes is over the limit of ${max}`);
    }
    if (type === FrameType.DATA) {
      if (length < 8) throw new ProtocolError("DATA frame shorter than its connectID");
      if (q.length < DATA_HEADER_BYTES) return null;
      const h = q.take(DATA_HEADER_BYTES);
      this.dataConnectId = h.readBigUInt64BE(FRAME_HEADER_BYTES);
      this.dataLeft = length - 8;
      // An empty DATA frame is legal (upstream sends none, but nothing forbids it).
      if (this.dataLeft === 0) return { kind: "data", connectId: this.dataConnectId, data: Buffer.alloc(0) };
      return this.nextDataSlice();
    }
    if ((type === FrameType.PING || type === FrameType.PONG) && length !== PING_PAYLOAD_BYTES) {
      throw new ProtocolError(`PING/PONG frames carry exactly ${PING_PAYLOAD_BYTES} bytes, not ${length}`);
    }
    if (q.length < FRAME_HEADER_BYTES + length) return null;
    q.skip(FRAME_HEADER_BYTES);
    return { kind: "frame", type: type as ControlFrame["type"], payload: q.take(length) };
  }

  private nextDataSlice(): DataSlice | null {
    const q = this.queue;
    if (this.slicing === "views") {
      if (q.length === 0) return null;
      const data = q.take(Math.min(q.first!.byteLength, this.dataLeft));
      this.dataLeft -= data.byteLength;
      return { kind: "data", connectId: this.dataConnectId, data };
    }
    const want = Math.min(this.dataLeft, DATA_SLICE_BYTES);
    if (q.length < want) return null;
    // All in one chunk: a view, and as much of the frame as that chunk holds.
    const first = q.first!;
    const data = first.byteLength >= want ? q.take(Math.min(first.byteLength, this.dataLeft)) : q.take(want);
    this.dataLeft -= data.byteLength;
    return { kind: "data", connectId: this.dataConnectId, data };
  }
}
