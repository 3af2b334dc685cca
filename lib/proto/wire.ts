/**
 * Protobuf wire primitives for the tunnel codec: varint sizes, a writer into a pre-sized buffer,
 * and a bounds-checked reader. Split from codec.ts so each file stays about one thing; nothing
 * here knows the Packet schema.
 */
import { ProtocolError } from "../errors.js";

export const WIRE_VARINT = 0;
export const WIRE_FIXED64 = 1;
export const WIRE_LEN = 2;
export const WIRE_FIXED32 = 5;

const TWO_POW_53 = 2n ** 53n;

// ---------------------------------------------------------------------------------------------
// Sizes

export function varintSize(n: number): number {
  if (n < 0x80) return 1;
  if (n < 0x4000) return 2;
  if (n < 0x200000) return 3;
  if (n < 0x10000000) return 4;
  let size = 5;
  for (let v = Math.floor(n / 0x800000000); v > 0; v = Math.floor(v / 0x80)) size++;
  return size;
}

function int64Size(v: bigint): number {
  if (v >= 0n && v < TWO_POW_53) return varintSize(Number(v));
  if (v < 0n) return 10; // negative int64 is always a ten-byte two's-complement varint
  let size = 1;
  for (let u = v >> 7n; u > 0n; u >>= 7n) size++;
  return size;
}

export const int64FieldSize = (v: bigint): number => (v === 0n ? 0 : 1 + int64Size(v));
export const lenFieldSize = (len: number): number => (len === 0 ? 0 : 1 + varintSize(len) + len);

// ---------------------------------------------------------------------------------------------
// Encoding

export class Writer {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  varint(n: number): void {
    const buf = this.buf;
    while (n >= 0x80) {
      buf[this.pos++] = (n % 0x80) | 0x80;
      n = Math.floor(n / 0x80);
    }
    buf[this.pos++] = n;
  }

  int64(v: bigint): void {
    if (v >= 0n && v < TWO_POW_53) {
      this.varint(Number(v));
      return;
    }
    let u = BigInt.asUintN(64, v);
    while (u >= 0x80n) {
      this.buf[this.pos++] = Number(u & 0x7fn) | 0x80;
      u >>= 7n;
    }
    this.buf[this.pos++] = Number(u);
  }

  int64Field(tag: number, v: bigint): void {
    if (v === 0n) return;
    this.buf[this.pos++] = tag;
    this.int64(v);
  }

  stringField(tag: number, s: string, byteLength: number): void {
    if (byteLength === 0) return;
    this.buf[this.pos++] = tag;
    this.varint(byteLength);
    this.pos += this.buf.write(s, this.pos, byteLength, "utf8");
  }

  bytesField(tag: number, b: Uint8Array): void {
    if (b.byteLength === 0) return;
    this.buf[this.pos++] = tag;
    this.varint(b.byteLength);
    this.buf.set(b, this.pos);
    this.pos += b.byteLength;
  }
}

// ---------------------------------------------------------------------------------------------
// Decoding

export class Reader {
  constructor(
    readonly buf: Buffer,
    public pos: number,
    readonly end: number,
  ) {}

  /** A varint that must fit in 32 bits unsigned: tags and lengths. */
  uint32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new ProtocolError("truncated varint");
      const b = this.buf[this.pos++]!;
      if (shift === 28 && b > 0x0f) throw new ProtocolError("varint overflows 32 bits");
      result += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return result;
      shift += 7;
    }
  }

  int64(): bigint {
    let lo = 0; // low 28 bits, accumulated as a safe integer
    let shift = 0;
    for (;;) {
      if (this.pos >= this.end) throw new ProtocolError("truncated varint");
      const b = this.buf[this.pos++]!;
      lo += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return BigInt(lo);
      shift += 7;
      if (shift === 49) return this.int64Slow(lo);
    }
  }

  private int64Slow(low49: number): bigint {
    // Past 49 bits a double can no longer hold the value exactly; finish in bigint.
    let v = BigInt(low49);
    let shift = 49n;
    for (let i = 0; i < 3; i++) {
      if (this.pos >= this.end) throw new ProtocolError("truncated varint");
      const b = this.buf[this.pos++]!;
      v |= BigInt(b & 0x7f) << shift;
      if (b < 0x80) return BigInt.asIntN(64, v);
      shift += 7n;
    }
    throw new ProtocolError("varint longer than ten bytes");
  }

  lengthDelimited(): [start: number, end: number] {
    const len = this.uint32();
    const start = this.pos;
    if (len > this.end - start) throw new ProtocolError("length-delimited field overruns message");
    this.pos = start + len;
    return [start, start + len];
  }

  string(): string {
    const [start, end] = this.lengthDelimited();
    return this.buf.toString("utf8", start, end);
  }

  skip(wireType: number): void {
    switch (wireType) {
      case WIRE_VARINT:
        this.int64();
        return;
      case WIRE_FIXED64:
        this.advance(8);
        return;
      case WIRE_LEN:
        this.lengthDelimited();
        return;
      case WIRE_FIXED32:
        this.advance(4);
        return;
      default:
        throw new ProtocolError(`unsupported wire type ${wireType}`);
    }
  }

  private advance(n: number): void {
    if (n > this.end - this.pos) throw new ProtocolError("truncated fixed-width field");
    this.pos += n;
  }
}

export function expectWireType(actual: number, expected: number, field: string): void {
  if (actual !== expected) throw new ProtocolError(`field ${field} has wire type ${actual}`);
}
