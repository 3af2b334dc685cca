/** Order statistics over samples. */

export function median(samples: readonly number[]): number {
  return percentile(samples, 50);
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
