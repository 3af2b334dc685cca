/**
 * The client end of one gRPC call on a Node HTTP/2 client stream, as a PacketStream: what the
 * fleet's peer links (lib/fleet/peer/) use for ProxyService.Proxy on the owner's peer port. The
 * counterpart of the server's GrpcCallStream (call-stream.ts), with the same habits and the same
 * framing (packet-message.ts): a DATA packet goes out as a small header and the caller's own
 * buffer in one writev, never copied; received messages come out as views
 * of the HTTP/2 chunks when they fit in one (lib/proto/grpc-http2.ts). Delivery, pausing and
 * backpressure are DecodingPacketStream's: a paused call stops reading its stream, and HTTP/2's
 * per-stream flow control then holds the owner back on this tunnel alone.
 */
import { type ClientHttp2Stream, constants, type IncomingHttpHeaders } from "node:http2";
import { ProtocolError } from "../../errors.js";
import { decodePacket } from "../../proto/codec.js";
import { GrpcMessageDecoder } from "../../proto/grpc-http2.js";
import type { Packet } from "../../proto/packet.js";
import { DecodingPacketStream } from "../decoding-packet-stream.js";
import { writePacketMessage } from "./packet-message.js";

/** The call's gRPC status, once the owner sent it (trailers, or a trailers-only answer). */
export interface CallStatus {
  code: number;
  message: string;
}

export class GrpcClientCallStream extends DecodingPacketStream {
  private readonly decoder: GrpcMessageDecoder;
  /** Null until the owner ended the call with a status. */
  status: CallStatus | null = null;

  constructor(
    private readonly stream: ClientHttp2Stream,
    maxMessageBytes: number,
    highWaterMark: number,
  ) {
    super(stream, highWaterMark);
    this.decoder = new GrpcMessageDecoder(maxMessageBytes);
    stream.on("response", (headers) => {
      const status = headers[":status"];
      if (status !== 200) this.status = { code: -1, message: `HTTP status ${String(status)}` };
      else this.readStatus(headers);
    });
    stream.on("trailers", (trailers) => this.readStatus(trailers));
    stream.on("data", (chunk: Buffer) => {
      if (this.failed) return;
      this.decoder.push(chunk);
      this.flush();
    });
    stream.once("close", () => this.closed());
  }

  private readStatus(headers: IncomingHttpHeaders): void {
    const code = headers["grpc-status"];
    if (typeof code !== "string") return;
    const message = headers["grpc-message"];
    this.status = { code: Number(code), message: typeof message === "string" ? decodeMessage(message) : "" };
  }

  write(packet: Packet, cb?: (err?: Error | null) => void): boolean {
    const s = this.stream;
    if (s.destroyed || s.writableEnded) return false;
    writePacketMessage(s, packet, cb);
    return this.accepted();
  }

  /** Half-closes the call: the owner sees the end of our messages. */
  end(): void {
    if (!this.stream.writableEnded && !this.stream.destroyed) this.stream.end();
  }

  /** Resets the stream (RST_STREAM CANCEL); nothing more is delivered. */
  destroy(_err?: Error): void {
    this.failed = true;
    if (this.stream.destroyed) return;
    if (this.stream.closed) this.stream.destroy();
    else this.stream.close(constants.NGHTTP2_CANCEL);
  }

  /** Whether the stream ended in a reset (either side) rather than both sides ending. */
  get reset(): boolean {
    const code = this.stream.rstCode;
    return code !== undefined && code !== constants.NGHTTP2_NO_ERROR;
  }

  protected get pendingBytes(): number {
    return this.decoder.pendingBytes;
  }

  protected nextPacket(): Packet | null {
    const message = this.decoder.next();
    return message === null ? null : decodePacket(message);
  }

  protected malformed(err: Error): void {
    this.emit("error", err);
    this.destroy();
  }

  protected endedMidFrame(): void {
    this.emit("error", new ProtocolError("the peer ended the call in the middle of a message"));
    this.destroy();
  }
}

/** `grpc-message` is percent-encoded (lib/proto/grpc-http2.ts); undecodable text is kept as is. */
function decodeMessage(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
