/**
 * Just enough WebSocket (RFC 6455) for exec's v5.channel.k8s.io protocol: single-frame messages,
 * both ends. Used by the fake kubelet and by the test's exec client.
 */

export const WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/** One WebSocket frame (FIN set); masked when `maskKey` is given, as a client must send them. */
export function wsFrame(opcode: number, payload: Buffer, maskKey?: Buffer): Buffer {
  const len = payload.length;
  const ext = len < 126 ? 0 : len < 65536 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + (maskKey ? 4 : 0));
  head[0] = 0x80 | opcode;
  head[1] = (maskKey ? 0x80 : 0) | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  if (!maskKey) return Buffer.concat([head, payload]);
  maskKey.copy(head, 2 + ext);
  const masked = Buffer.from(payload);
  for (let i = 0; i < masked.length; i++) masked[i]! ^= maskKey[i & 3]!;
  return Buffer.concat([head, masked]);
}

/** Incremental WebSocket frame parser (handles masked and unmasked frames). */
export class WsParser {
  private buf: Buffer = Buffer.alloc(0);
  constructor(private readonly onFrame: (opcode: number, payload: Buffer) => void) {}
  push(chunk: Buffer): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    for (;;) {
      if (this.buf.length < 2) return;
      const opcode = this.buf[0]! & 0x0f;
      const masked = (this.buf[1]! & 0x80) !== 0;
      let len = this.buf[1]! & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        len = Number(this.buf.readBigUInt64BE(2));
        off = 10;
      }
      const maskOff = off;
      if (masked) off += 4;
      if (this.buf.length < off + len) return;
      const payload = Buffer.from(this.buf.subarray(off, off + len));
      if (masked) for (let i = 0; i < len; i++) payload[i]! ^= this.buf[maskOff + (i & 3)]!;
      this.buf = this.buf.subarray(off + len);
      this.onFrame(opcode, payload);
    }
  }
}

/** v5.channel.k8s.io stream ids (first byte of each binary message). */
export const CHANNEL = { stdin: 0, stdout: 1, stderr: 2, error: 3, close: 255 } as const;
