/**
 * The content of every transfer, checked byte for byte at the receiving end: a fixed
 * pseudo-random sequence, repeated with a period of PATTERN_PERIOD bytes, which each transfer
 * enters at an offset of its own (sent with the command). A lost, repeated or reordered chunk
 * shifts the sequence, and a chunk of another connection sits at another offset, so either shows
 * up as a mismatch. Checking is a memcmp against the pattern (no per-byte JavaScript), and
 * sending writes slices of it, so neither end allocates per chunk.
 */

/** A prime, so that no chunk, record or frame size divides it. */
export const PATTERN_PERIOD = 1_048_573;
/** Fixed: both ends build the same sequence. */
const PATTERN_SEED = 0x9e3779b9;

/** The pattern twice over, so that any window of up to PATTERN_PERIOD bytes is contiguous. */
const DOUBLED: Buffer = (() => {
  const words = new Uint32Array(Math.ceil(PATTERN_PERIOD / 4));
  let x = PATTERN_SEED;
  for (let i = 0; i < words.length; i++) {
    // xorshift32
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    words[i] = x >>> 0;
  }
  const once = Buffer.from(words.buffer, 0, PATTERN_PERIOD);
  return Buffer.concat([once, once]);
})();

/** A random entry offset for a new transfer. */
export function randomStart(): number {
  return Math.floor(Math.random() * PATTERN_PERIOD);
}

/** The sender's side: consecutive slices of the pattern from `start` on. */
export class PatternSource {
  private at: number;

  constructor(start: number) {
    this.at = start % PATTERN_PERIOD;
  }

  /** The next `n` bytes (n ≤ PATTERN_PERIOD), a view of the shared pattern. */
  next(n: number): Buffer {
    const len = Math.min(n, PATTERN_PERIOD);
    const slice = DOUBLED.subarray(this.at, this.at + len);
    this.at = (this.at + len) % PATTERN_PERIOD;
    return slice;
  }
}

/** The receiver's side: checks each chunk against the pattern from `start` on. */
export class PatternCheck {
  private at: number;
  /** Bytes checked and found equal so far. */
  checked = 0;

  constructor(start: number) {
    this.at = start % PATTERN_PERIOD;
  }

  /**
   * Whether `chunk` is the next stretch of the pattern. On false, the stretch that differs starts
   * at byte `checked` of the transfer.
   */
  accept(chunk: Buffer): boolean {
    for (let i = 0; i < chunk.length; ) {
      const len = Math.min(chunk.length - i, PATTERN_PERIOD);
      if (!chunk.subarray(i, i + len).equals(DOUBLED.subarray(this.at, this.at + len))) return false;
      i += len;
      this.checked += len;
      this.at = (this.at + len) % PATTERN_PERIOD;
    }
    return true;
  }
}
