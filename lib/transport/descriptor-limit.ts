/**
 * The process's open-files limit (its soft RLIMIT_NOFILE, which Node raises to the hard limit at
 * start-up), from /proc/self/limits; null where that file is not there (not Linux) or
 * says "unlimited". Connections waiting for a TLS handshake each hold a descriptor
 * (handshake-gate.ts): their number is kept well under this, so that waiting never takes the
 * descriptors open tunnels and new dials need.
 */
import { readFileSync } from "node:fs";

export function openFilesLimit(): number | null {
  try {
    return parseOpenFilesLimit(readFileSync("/proc/self/limits", "utf8"));
  } catch {
    return null;
  }
}

/** The soft limit on the "Max open files" line of /proc/self/limits text, or null. */
export function parseOpenFilesLimit(text: string): number | null {
  const line = text.split("\n").find((l) => l.startsWith("Max open files"));
  const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
  const n = soft === undefined ? Number.NaN : Number(soft);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}
