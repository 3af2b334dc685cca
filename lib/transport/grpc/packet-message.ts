/**
 * Writes one Packet as a gRPC message on an HTTP/2 stream, either end of a call (call-stream.ts,
 * client-call-stream.ts). A DATA packet goes out as a small header (the 5-byte prefix plus the
 * protobuf fields before the bytes, lib/proto/codec.ts) and the sender's own buffer in one
 * writev, never copied; any other packet is encoded whole behind its prefix.
 */
import type { Http2Stream } from "node:http2";
import { encodeDataPacketHeader, encodePacket } from "../../proto/codec.js";
import { MESSAGE_PREFIX_BYTES, writeMessagePrefix } from "../../proto/grpc-http2.js";
import { type Packet, PacketType } from "../../proto/packet.js";

export function writePacketMessage(s: Http2Stream, packet: Packet, cb?: (err?: Error | null) => void): void {
  if (packet.type === PacketType.DATA && packet.error === "") {
    const n = packet.data.byteLength;
    const header = encodeDataPacketHeader(packet.connectId, n, MESSAGE_PREFIX_BYTES);
    writeMessagePrefix(header, header.byteLength - MESSAGE_PREFIX_BYTES + n);
    // Header and bytes in one writev; the bytes are the sender's buffer, not a copy.
    s.cork();
    s.write(header);
    s.write(packet.data, cb);
    s.uncork();
  } else {
    const body = encodePacket(packet);
    const message = Buffer.allocUnsafe(MESSAGE_PREFIX_BYTES + body.byteLength);
    writeMessagePrefix(message, body.byteLength);
    message.set(body, MESSAGE_PREFIX_BYTES);
    s.write(message, cb);
  }
}
