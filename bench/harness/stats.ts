/** Order statistics over samples. */

/** The middle value, or the mean of the two middle ones: with two rounds, neither is favoured. */
export function median(samples: readonly number[]): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Nearest-rank percentile (p in 0..100): a value that was actually observed. */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** Bytes over milliseconds, in MB/s (10^6 bytes per second). */
export function mbPerSecond(bytes: number, ms: number): number {
  return ms > 0 ? bytes / 1000 / ms : 0;
}

/** The median of some figures and their range. */
export interface Spread {
  median: number;
  min: number;
  max: number;
  count: number;
}

export function spread(values: readonly number[]): Spread {
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), count: values.length };
}
