/**
 * The gRPC-over-HTTP/2 wire format (PROTOCOL-HTTP2.md in grpc/grpc), as far as a server of one
 * bidirectional method needs it: length-prefixed messages (a compressed flag, u8; a length, u32
 * big-endian; the message), the `grpc-timeout` header and the `grpc-message` trailer's
 * percent-encoding.
 *
 * Nothing here touches a stream: the decoder is fed DATA chunks and yields whole messages, and
 * is tested with plain buffers. A message that lies in one chunk comes out as a view of it; one
 * spread over several chunks (HTTP/2 DATA frames are 16 KiB) is joined with one copy.
 */
import { MessageTooLargeError, ProtocolError, UnsupportedError } from "../errors.js";
import { ChunkQueue } from "./chunk-queue.js";

export const MESSAGE_PREFIX_BYTES = 5;

/** Writes a message prefix for `length` bytes at `offset` of `buf` (flag 0: not compressed). */
export function writeMessagePrefix(buf: Buffer, length: number, offset = 0): void {
  buf[offset] = 0;
  buf.writeUInt32BE(length, offset + 1);
}

export class GrpcMessageDecoder {
  private readonly queue = new ChunkQueue();

  constructor(private readonly maxMessageBytes: number) {}

  /** Bytes received and not yet handed out as messages. */
  get pendingBytes(): number {
    return this.queue.length;
  }

  push(chunk: Buffer): void {
    this.queue.push(chunk);
  }

  /**
   * The next whole message, or null until one is in. Throws, as soon as the prefix is in, for a
   * compressed message (we announce and accept identity only: UnsupportedError), an invalid flag
   * (ProtocolError) or a message over the limit (MessageTooLargeError), before buffering it.
   */
  next(): Buffer | null {
    const q = this.queue;
    if (q.length < MESSAGE_PREFIX_BYTES) return null;
    const prefix = q.peek(MESSAGE_PREFIX_BYTES);
    const flag = prefix[0]!;
    const length = prefix.readUInt32BE(1);
    if (flag === 1) {
      throw new UnsupportedError("compressed message, but this server accepts identity encoding only");
    }
    if (flag !== 0) throw new ProtocolError(`invalid gRPC message flag ${flag}`);
    if (length > this.maxMessageBytes) throw new MessageTooLargeError(length, this.maxMessageBytes);
    if (q.length < MESSAGE_PREFIX_BYTES + length) return null;
    q.skip(MESSAGE_PREFIX_BYTES);
    return q.take(length);
  }
}

const TIMEOUT_UNIT_MS: Record<string, number> = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 };

/** Milliseconds of a `grpc-timeout` value ("<up to 8 digits><H|M|S|m|u|n>"); null if malformed. */
export function parseGrpcTimeout(value: string): number | null {
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (!m) return null;
  return Number(m[1]) * TIMEOUT_UNIT_MS[m[2]!]!;
}

/**
 * `grpc-message` percent-encoding: bytes outside printable ASCII, and "%" itself, as %XX of
 * their UTF-8 encoding.
 */
export function encodeGrpcMessage(message: string): string {
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
