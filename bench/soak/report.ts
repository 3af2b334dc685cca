/**
 * The soak's output: one table row per sample (memory and descriptors of the server, what the
 * load did since the previous row), and a summary line with the growth from BASELINE_MINUTE to
 * the end of the load.
 */
import { median } from "../harness/stats.js";
import type { MemoryReading } from "./server-sampler.js";
import type { Counts, Tally } from "./tally.js";

export interface SoakSample extends MemoryReading {
  /** Minutes since the load started; 0 before it, null after it stopped and drained. */
  minute: number | null;
  at: string;
  /** Cumulative counts at the time of the sample. */
  counts: Counts;
}

const mib = (kib: number | undefined): string => (kib === undefined ? "?" : (kib / 1024).toFixed(1));
const n = (v: number): string => v.toLocaleString("en-US");
const signed = (v: number, digits = 0): string => `${v >= 0 ? "+" : ""}${v.toFixed(digits)}`;

const COLUMNS = [
  "minute",
  "RSS MiB",
  "heap used MiB",
  "heap total MiB",
  "fds",
  "server CPU %",
  "dials ok",
  "dials failed",
  "(in restarts)",
  "transfers ok",
  "transfers failed",
  "(in restarts)",
  "MB checked",
  "agent restarts",
  "slow opened",
  "slow closed by server",
];

function row(s: SoakSample, prev: SoakSample | undefined): string[] {
  const d = (k: keyof Counts) => s.counts[k] - (prev?.counts[k] ?? 0);
  const wall = prev ? (Date.parse(s.at) - Date.parse(prev.at)) / 1000 : 0;
  const cpu = prev && wall > 0 ? ((100 * (s.cpuSeconds - prev.cpuSeconds)) / wall).toFixed(0) : "";
  return [
    s.minute === null ? "after" : String(s.minute),
    mib(s.rssKiB),
    mib(s.heapUsedKiB),
    mib(s.heapTotalKiB),
    String(s.fds),
    cpu,
    n(d("dialsOk")),
    n(d("dialsFailed")),
    n(d("dialsFailedDuringRestart")),
    n(d("transfersOk")),
    n(d("transfersFailed")),
    n(d("transfersFailedDuringRestart")),
    n(Math.round(d("bytes") / 1e6)),
    n(d("agentRestarts")),
    n(d("slowOpened")),
    n(d("slowClosedByServer")),
  ];
}

export function renderTable(samples: readonly SoakSample[]): string {
  const rows = [COLUMNS, ...samples.map((s, i) => row(s, samples[i - 1]))];
  const widths = COLUMNS.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  const line = (r: string[]) =>
    r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join("  ");
  return [line(rows[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...rows.slice(1).map(line)].join("\n");
}

function growth(label: string, from: number | undefined, to: number | undefined, unit: "MiB" | ""): string {
  if (from === undefined || to === undefined) return `${label} ?`;
  if (unit === "") return `${label} ${from} → ${to} (${signed(to - from)})`;
  return `${label} ${mib(from)} → ${mib(to)} MiB (${signed((to - from) / 1024, 1)})`;
}

/** The one-line verdict: growth between the baseline minute and the end, and what the load did. */
export function summaryLine(samples: readonly SoakSample[], baselineMinute: number, tally: Tally): string {
  const during = samples.filter((s) => s.minute !== null && s.minute >= 1);
  const base = during.find((s) => s.minute === baselineMinute) ?? during[0];
  const last = during.at(-1);
  const idle = samples.find((s) => s.minute === 0);
  const after = samples.find((s) => s.minute === null);
  const c = tally.counts;
  const lifetimes = tally.slowLifetimesMs;
  const closedAfter = lifetimes.length ? ` (median after ${(median(lifetimes) / 1000).toFixed(1)} s)` : "";
  return [
    `server from minute ${base?.minute ?? "?"} to ${last?.minute ?? "?"}: ` +
      [
        growth("RSS", base?.rssKiB, last?.rssKiB, "MiB"),
        growth("heap used", base?.heapUsedKiB, last?.heapUsedKiB, "MiB"),
        growth("fds", base?.fds, last?.fds, ""),
      ].join(", "),
    `idle before the load and after it: fds ${idle?.fds ?? "?"} → ${after?.fds ?? "?"}, ` +
      `RSS ${mib(idle?.rssKiB)} → ${mib(after?.rssKiB)} MiB`,
    `dials ${n(c.dialsOk)} ok, ${n(c.dialsFailed)} failed ` +
      `(+${n(c.dialsFailedDuringRestart)} during agent restarts); ` +
      `transfers ${n(c.transfersOk)} ok (${n(Math.round(c.bytes / 1e6))} MB checked), ` +
      `${n(c.transfersFailed)} failed (${n(c.corrupted)} corrupted; ` +
      `+${n(c.transfersFailedDuringRestart)} during agent restarts); ` +
      `${n(c.agentRestarts)} agent restarts (${n(c.agentRestartsFailed)} failed); ` +
      `slow handshakes ${n(c.slowOpened)} opened, ` +
      `${n(c.slowClosedByServer)} closed by the server${closedAfter}`,
  ].join("\n");
}
