/**
 * Rendering results: one table per scenario, as aligned text (terminal) or Markdown
 * (docs/PERFORMANCE.md), with the ratios and the issue's targets derived from the figures.
 */
import type { BenchResults, Cell, MachineInfo, Row, ScenarioResult, System, Target, Unit } from "./types.js";

const HEADERS = [
  "scenario",
  "kgw",
  "direct TCP",
  "2-hop relay",
  "kgw/relay",
  "upstream",
  "kgw/upstream",
  "targets",
];

function group(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatValue(value: number, unit: Unit): string {
  switch (unit) {
    case "MB/s":
      return `${value >= 100 ? group(value) : value >= 10 ? value.toFixed(1) : value.toFixed(2)} MB/s`;
    case "ms":
      return `${value >= 100 ? group(value) : value >= 10 ? value.toFixed(1) : value >= 1 ? value.toFixed(2) : value.toFixed(3)} ms`;
    case "dials/s":
      return `${group(value)} /s`;
    case "KiB":
      return `${value >= 100 ? group(value) : value.toFixed(1)} KiB`;
    case "%":
      return `${value.toFixed(0)}%`;
    case "µs/MB":
      return `${group(value)} µs/MB`;
  }
}

function cellText(cell: Cell | undefined, unit: Unit): string {
  if (!cell) return "n/a";
  if (cell.error) return "error";
  if (cell.value === undefined || !Number.isFinite(cell.value)) return "n/a";
  return cell.note ? `${formatValue(cell.value, unit)} (${cell.note})` : formatValue(cell.value, unit);
}

export function value(row: Row, system: System): number | undefined {
  const v = row.cells[system]?.value;
  return v !== undefined && Number.isFinite(v) ? v : undefined;
}

function ratioText(row: Row, other: System): string {
  if (row.noRatios) return "";
  const a = value(row, "kgw");
  const b = value(row, other);
  if (a === undefined || b === undefined || b === 0) return "n/a";
  const r = a / b;
  return `${r >= 10 ? r.toFixed(1) : r.toFixed(2)}×`;
}

function targetLabel(t: Target, row: Row): string {
  switch (t.kind) {
    case "ratioToRelay":
      return `≥${t.min}× relay`;
    case "atLeast":
      return `≥${formatValue(t.value, row.unit)}`;
    case "atMost":
      return `<${formatValue(t.value, row.unit)}`;
    case "upstream":
      return row.better === "higher" ? "≥upstream" : "≤upstream";
  }
}

/** true / false, or undefined when a figure it needs is missing. */
export function targetMet(t: Target, row: Row): boolean | undefined {
  const k = value(row, "kgw");
  if (k === undefined) return undefined;
  switch (t.kind) {
    case "ratioToRelay": {
      const r = value(row, "relay");
      return r === undefined || r === 0 ? undefined : k / r >= t.min;
    }
    case "atLeast":
      return k >= t.value;
    case "atMost":
      return k < t.value;
    case "upstream": {
      const u = value(row, "upstream");
      if (u === undefined) return undefined;
      return row.better === "higher" ? k >= u : k <= u;
    }
  }
}

function targetsText(row: Row): string {
  return (row.targets ?? [])
    .map((t) => {
      const met = targetMet(t, row);
      return `${targetLabel(t, row)} ${met === undefined ? "?" : met ? "✓" : "✗"}`;
    })
    .join(", ");
}

function rowCells(row: Row): string[] {
  const arrow = row.better === "higher" ? "↑" : "↓";
  return [
    `${row.name} ${arrow}`,
    cellText(row.cells.kgw, row.unit),
    cellText(row.cells.direct, row.unit),
    cellText(row.cells.relay, row.unit),
    ratioText(row, "relay"),
    cellText(row.cells.upstream, row.unit),
    ratioText(row, "upstream"),
    targetsText(row),
  ];
}

function errorsOf(s: ScenarioResult): string[] {
  const out: string[] = [];
  if (s.error) out.push(`scenario failed: ${s.error}`);
  for (const row of s.rows) {
    for (const [system, cell] of Object.entries(row.cells)) {
      if (cell?.error) out.push(`${row.name} / ${system}: ${cell.error.split("\n")[0]}`);
    }
  }
  return out;
}

function notesOf(s: ScenarioResult): string[] {
  const seen = new Set<string>();
  for (const row of s.rows) {
    for (const cell of Object.values(row.cells)) if (cell?.na) seen.add(cell.na);
  }
  return [...seen].map((n) => `n/a: ${n}`);
}

function textTable(rows: string[][]): string {
  const widths = HEADERS.map((_, i) => Math.max(...rows.map((r) => [...(r[i] ?? "")].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join("  ")
      .trimEnd();
  return [line(rows[0]!), widths.map((w) => "-".repeat(w)).join("  "), ...rows.slice(1).map(line)].join("\n");
}

function markdownTable(rows: string[][]): string {
  const esc = (c: string) => c.replaceAll("|", "\\|");
  const line = (r: string[]) => `| ${r.map(esc).join(" | ")} |`;
  const align = `|${HEADERS.map((_, i) => (i === 0 || i === HEADERS.length - 1 ? " --- " : " ---: ")).join("|")}|`;
  return [line(rows[0]!), align, ...rows.slice(1).map(line)].join("\n");
}

export function machineLines(m: MachineInfo): string[] {
  return [
    `CPU: ${m.cpu}, ${m.cores} cores available; ${m.memoryGiB} GiB RAM; Linux ${m.kernel}`,
    `Node ${m.node}; ${m.go ?? "go: not on the PATH"}; ${m.upstreamVersion ? `upstream apiserver-network-proxy ${m.upstreamVersion}` : "no upstream column"}`,
    `open files limit ${m.fdLimit}; commit ${m.commit}`,
  ];
}

export function renderScenario(s: ScenarioResult, markdown: boolean): string {
  const rows = [HEADERS, ...s.rows.map(rowCells)];
  const table = markdown ? markdownTable(rows) : textTable(rows);
  const extra = [...errorsOf(s), ...notesOf(s)];
  const load =
    s.otherCores === undefined
      ? ""
      : `; other processes used ${s.otherCores.toFixed(2)} cores, steal ${s.stealCores.toFixed(2)}`;
  const heading = markdown
    ? `### ${s.title}\n\n\`${s.name}\`: ${s.seconds.toFixed(0)} s${load}`
    : `== ${s.title} (${s.name}: ${s.seconds.toFixed(0)} s${load}) ==`;
  const footer = extra.length ? `\n${extra.map((e) => (markdown ? `- ${e}` : `  ${e}`)).join("\n")}` : "";
  return `${heading}\n\n${table}\n${footer}${footer ? "\n" : ""}`;
}

export function renderResults(r: BenchResults, markdown: boolean): string {
  const head = markdown
    ? [`Command: \`${r.command}\` (${r.startedAt})`, "", ...machineLines(r.machine).map((l) => `- ${l}`)]
    : [`${r.command}  (${r.startedAt})`, ...machineLines(r.machine)];
  const legend =
    "↑ higher is better, ↓ lower is better. MB/s = 10^6 bytes/s. Ratios are kgw divided by the baseline. " +
    "Throughput figures are medians of repeated runs; targets are the issue's.";
  return [...head, "", ...r.scenarios.map((s) => renderScenario(s, markdown)), legend, ""].join("\n");
}
