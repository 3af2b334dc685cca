import { ConfigError } from "../errors.js";

/** Milliseconds per unit, in Go's `time.ParseDuration` spelling (upstream flags use it). */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const TERM = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/**
 * Parses a Go duration ("200ms", "1h30m", "1.5s", "0") into milliseconds. Negative durations
 * are refused: no flag of ours has a meaning for them.
 */
export function parseDuration(text: string, flag = "duration"): number {
  const s = text.trim();
  if (s === "0") return 0;
  if (s === "") throw new ConfigError(`${flag}: empty duration`);
  let ms = 0;
  TERM.lastIndex = 0;
  while (TERM.lastIndex < s.length) {
    const start = TERM.lastIndex;
    const m = TERM.exec(s);
    if (!m) {
      throw new ConfigError(
        `${flag}: invalid duration "${text}" at "${s.slice(start)}" (use e.g. 200ms, 10s, 1h)`,
      );
    }
    ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  }
  if (!Number.isFinite(ms)) throw new ConfigError(`${flag}: duration "${text}" is out of range`);
  return ms;
}

/** Formats milliseconds the way Go prints durations, for help text and logs. */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = (ms % 60_000) / 1000;
  return `${h ? `${h}h` : ""}${h || m ? `${m}m` : ""}${s}s`;
}
