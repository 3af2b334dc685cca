/**
 * Received chunks not yet decoded, for the framing decoders (kgw-tunnel/1, gRPC messages).
 *
 * Bytes that lie in one chunk come out as views of it; bytes that span chunks are copied once,
 * and only those bytes: peeking at a 5-byte header split across chunks never copies everything
 * behind it (a peer that split every header from a large payload would make that quadratic).
 */
export class ChunkQueue {
  private chunks: Buffer[] = [];
  private buffered = 0;

  /** Bytes held. */
  get length(): number {
    return this.buffered;
  }

  /** The first chunk (non-empty), if any. */
  get first(): Buffer | undefined {
    return this.chunks[0];
  }

  push(chunk: Buffer): void {
    if (chunk.byteLength === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.byteLength;
  }

  /** The first `n` bytes (n <= length) without consuming them. */
  peek(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.byteLength >= n) return first.subarray(0, n);
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    for (const c of this.chunks) {
      off += c.copy(out, off, 0, Math.min(c.byteLength, n - off));
      if (off === n) break;
    }
    return out;
  }

  /** Removes and returns the first `n` bytes (n <= length). */
  take(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    const first = this.chunks[0]!;
    if (first.byteLength >= n) {
      const out = first.subarray(0, n);
      this.skip(n);
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.chunks[0]!;
      const k = Math.min(c.byteLength, n - off);
      c.copy(out, off, 0, k);
      off += k;
      this.skip(k);
    }
    return out;
  }

  /** Drops the first `n` bytes (n <= length). */
  skip(n: number): void {
    while (n > 0) {
      const first = this.chunks[0]!;
      const k = Math.min(n, first.byteLength);
      if (k === first.byteLength) this.chunks.shift();
      else this.chunks[0] = first.subarray(k);
      this.buffered -= k;
      n -= k;
    }
  }
}
