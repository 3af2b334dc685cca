/**
 * Rendering results: one table per scenario, as aligned text (terminal) or Markdown
 * (docs/PERFORMANCE.md), with the ratios and the issue's targets derived from the figures.
 */
import { kgwRatio, ratio } from "./ratios.js";
import type { Spread } from "./stats.js";
import {
  type BenchResults,
  type Cell,
  HOP_SYSTEM,
  type MachineInfo,
  NOISY_SYSTEM,
  type Row,
  type ScenarioResult,
  type System,
  type Target,
  TENANT_SYSTEM,
  type Unit,
} from "./types.js";

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
/** Next to kgw's column, in the tables of scenarios that measured kgw in tenant mode. */
const TENANT_HEADERS = ["kgw tenant mode", "tenant mode/kgw"];

/**
 * The table of a scenario that measured a quiet tenant alone (kgw) and next to a noisy tenant
 * (`fairness`): no baseline has tenants, so it shows the two, their ratio and upstream's n/a.
 */
const NOISY_HEADERS = [
  "scenario",
  "quiet tenant alone",
  "next to the noisy tenant",
  "noisy/alone",
  "upstream",
];
/** The systems a noisy table shows (and whose n/a reasons it lists). */
const NOISY_SHOWN: readonly System[] = ["kgw", NOISY_SYSTEM, "upstream"];

/**
 * The table of the `peer-hop` scenario: the same dials entering the agent's own instance (kgw)
 * and another instance of the fleet, their ratio, then the baselines.
 */
const HOP_HEADERS = [
  "scenario",
  "one instance",
  "through a peer hop",
  "hop/one",
  "direct TCP",
  "2-hop relay",
  "upstream",
  "targets",
];
const hasHop = (s: ScenarioResult): boolean => s.rows.some((r) => r.cells[HOP_SYSTEM] !== undefined);

/** Whether a scenario measured kgw in tenant mode (--tenant-mode): then its table shows it. */
const hasTenant = (s: ScenarioResult): boolean => s.rows.some((r) => r.cells[TENANT_SYSTEM] !== undefined);
/** Whether a scenario measured a quiet tenant next to a noisy one: then its table is NOISY_HEADERS. */
const hasNoisy = (s: ScenarioResult): boolean => s.rows.some((r) => r.cells[NOISY_SYSTEM] !== undefined);

type Layout = "plain" | "tenant" | "noisy" | "hop";

const layoutOf = (s: ScenarioResult): Layout =>
  hasNoisy(s) ? "noisy" : hasHop(s) ? "hop" : hasTenant(s) ? "tenant" : "plain";

function headersFor(layout: Layout): string[] {
  if (layout === "noisy") return NOISY_HEADERS;
  if (layout === "hop") return HOP_HEADERS;
  return layout === "tenant" ? [HEADERS[0]!, HEADERS[1]!, ...TENANT_HEADERS, ...HEADERS.slice(2)] : HEADERS;
}

function group(n: number, digits = 0): string {
  return n.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** The number alone, with as many digits as its size deserves. */
function formatNumber(value: number, unit: Unit): string {
  switch (unit) {
    case "MB/s":
      return value >= 100 ? group(value) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
    case "ms":
    case "ms/s":
      return value >= 100
        ? group(value)
        : value >= 10
          ? value.toFixed(1)
          : value >= 1
            ? value.toFixed(2)
            : value.toFixed(3);
    case "KiB":
      return value >= 100 ? group(value) : value.toFixed(1);
    case "%":
      return value.toFixed(0);
    case "req/s":
    case "req/dial":
      return value >= 10 ? group(value) : value.toFixed(2);
    case "dials/s":
    case "conns/s":
    case "µs/MB":
    case "µs/dial":
    case "agents":
      return group(value);
    case "µs":
      return value >= 10 ? group(value) : value.toFixed(1);
  }
}

export function formatValue(value: number, unit: Unit): string {
  const n = formatNumber(value, unit);
  switch (unit) {
    case "%":
      return `${n}%`;
    case "dials/s":
    case "conns/s":
      return `${n} /s`;
    default:
      return `${n} ${unit}`;
  }
}

/** ` [min–max]` over the rounds, when there were several. */
function rangeText(rounds: readonly number[] | undefined, unit: Unit): string {
  if (!rounds || rounds.length < 2) return "";
  return ` [${formatNumber(Math.min(...rounds), unit)}–${formatNumber(Math.max(...rounds), unit)}]`;
}

function cellText(cell: Cell | undefined, unit: Unit): string {
  if (!cell) return "n/a";
  if (cell.error) return "error";
  if (cell.value === undefined || !Number.isFinite(cell.value)) return "n/a";
  const text = `${formatValue(cell.value, unit)}${rangeText(cell.rounds, unit)}`;
  return cell.note ? `${text} (${cell.note})` : text;
}

export function value(row: Row, system: System): number | undefined {
  const v = row.cells[system]?.value;
  return v !== undefined && Number.isFinite(v) ? v : undefined;
}

const times = (r: number): string => `${r >= 10 ? r.toFixed(1) : r.toFixed(2)}×`;

/** The median ratio, and its range when it was taken in several rounds. */
function ratioText(row: Row, num: System, den: System): string {
  if (row.noRatios) return "";
  const r: Spread | undefined = ratio(row, num, den);
  if (!r) return "n/a";
  return r.count < 2 ? times(r.median) : `${times(r.median)} [${times(r.min)}–${times(r.max)}]`;
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
    case "hopRatio":
      return `hop/one ≥${t.min}`;
    case "hopAdded":
      return `hop adds <${formatValue(t.ms, row.unit)}`;
  }
}

/** The peer hop's figure minus the single instance's, round by round: their median. */
function hopAdded(row: Row): number | undefined {
  const a = row.cells[HOP_SYSTEM]?.rounds;
  const b = row.cells.kgw?.rounds;
  if (!a || !b || a.length !== b.length || a.length === 0) return undefined;
  const d = a.map((v, i) => v - b[i]!).sort((x, y) => x - y);
  const mid = d.length >> 1;
  return d.length % 2 ? d[mid] : (d[mid - 1]! + d[mid]!) / 2;
}

/**
 * true / false, or undefined when a figure it needs is missing. Comparisons with a baseline use
 * the median of the per-round ratios, as the ratio columns show.
 */
export function targetMet(t: Target, row: Row): boolean | undefined {
  const k = value(row, "kgw");
  if (k === undefined) return undefined;
  switch (t.kind) {
    case "ratioToRelay": {
      const r = kgwRatio(row, "relay");
      return r === undefined ? undefined : r.median >= t.min;
    }
    case "atLeast":
      return k >= t.value;
    case "atMost":
      return k < t.value;
    case "upstream": {
      const r = kgwRatio(row, "upstream");
      if (r === undefined) return undefined;
      return row.better === "higher" ? r.median >= 1 : r.median <= 1;
    }
    case "hopRatio": {
      const r = ratio(row, HOP_SYSTEM, "kgw");
      return r === undefined ? undefined : r.median >= t.min;
    }
    case "hopAdded": {
      const d = hopAdded(row);
      return d === undefined ? undefined : d < t.ms;
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

function rowCells(row: Row, layout: Layout): string[] {
  const arrow = row.better === "higher" ? "↑" : "↓";
  if (layout === "noisy") {
    return [
      `${row.name} ${arrow}`,
      cellText(row.cells.kgw, row.unit),
      cellText(row.cells[NOISY_SYSTEM], row.unit),
      ratioText(row, NOISY_SYSTEM, "kgw"),
      cellText(row.cells.upstream, row.unit),
    ];
  }
  if (layout === "hop") {
    return [
      `${row.name} ${arrow}`,
      cellText(row.cells.kgw, row.unit),
      cellText(row.cells[HOP_SYSTEM], row.unit),
      ratioText(row, HOP_SYSTEM, "kgw"),
      cellText(row.cells.direct, row.unit),
      cellText(row.cells.relay, row.unit),
      cellText(row.cells.upstream, row.unit),
      targetsText(row),
    ];
  }
  const tenantCells =
    layout === "tenant"
      ? [cellText(row.cells[TENANT_SYSTEM], row.unit), ratioText(row, TENANT_SYSTEM, "kgw")]
      : [];
  return [
    `${row.name} ${arrow}`,
    cellText(row.cells.kgw, row.unit),
    ...tenantCells,
    cellText(row.cells.direct, row.unit),
    cellText(row.cells.relay, row.unit),
    ratioText(row, "kgw", "relay"),
    cellText(row.cells.upstream, row.unit),
    ratioText(row, "kgw", "upstream"),
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
  const shown = (system: string) => layoutOf(s) !== "noisy" || NOISY_SHOWN.includes(system as System);
  for (const row of s.rows) {
    for (const [system, cell] of Object.entries(row.cells)) if (cell?.na && shown(system)) seen.add(cell.na);
  }
  return [...seen].map((n) => `n/a: ${n}`);
}

/** `rows[0]` is the header. */
function textTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => [...(r[i] ?? "")].length)));
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
  const n = rows[0]!.length;
  const align = `|${rows[0]!.map((_, i) => (i === 0 || i === n - 1 ? " --- " : " ---: ")).join("|")}|`;
  return [line(rows[0]!), align, ...rows.slice(1).map(line)].join("\n");
}

export function machineLines(m: MachineInfo): string[] {
  return [
    `CPU: ${m.cpu}, ${m.cores} cores available; ${m.memoryGiB} GiB RAM; Linux ${m.kernel}`,
    `Node ${m.node}; ${m.go ?? "go: not on the PATH"}; ${m.upstreamVersion ? `upstream apiserver-network-proxy ${m.upstreamVersion}` : "no upstream column"}`,
    `open files limit ${m.fdLimit}; commit ${m.commit}`,
  ];
}

const cores = (v: number): string => v.toFixed(2);

/** Other load over the scenario, and per round when it ran in rounds. */
function loadText(s: ScenarioResult): string {
  const whole = `other processes used ${cores(s.otherCores)} cores, steal ${cores(s.stealCores)}`;
  if (!s.rounds?.length) return whole;
  const perRound = s.rounds
    .map(
      (r) =>
        `${r.round}: ${r.seconds.toFixed(0)} s, other ${cores(r.otherCores)}, steal ${cores(r.stealCores)}`,
    )
    .join("; ");
  return `${whole}; per round (cores) ${perRound}`;
}

/** Lines each implementation's processes wrote, to show the verbosity held. */
function logText(s: ScenarioResult): string {
  if (!s.logs?.length) return "";
  const sum = (prefix: string) =>
    s.logs!.filter((l) => l.file.startsWith(prefix)).reduce((a, l) => a + l.lines, 0);
  const up = s.logs.some((l) => l.file.startsWith("upstream")) ? `, upstream ${group(sum("upstream"))}` : "";
  return `; log lines written: kgw ${group(sum("kgw"))}${up}`;
}

export function renderScenario(s: ScenarioResult, markdown: boolean): string {
  const layout = layoutOf(s);
  const rows = [headersFor(layout), ...s.rows.map((r) => rowCells(r, layout))];
  const table = markdown ? markdownTable(rows) : textTable(rows);
  const extra = [...errorsOf(s), ...notesOf(s)];
  const about = `${s.seconds.toFixed(0)} s; ${loadText(s)}${logText(s)}`;
  const heading = markdown
    ? `### ${s.title}\n\n\`${s.name}\`: ${about}`
    : `== ${s.title} (${s.name}) ==\n${about}`;
  const footer = extra.length ? `\n${extra.map((e) => (markdown ? `- ${e}` : `  ${e}`)).join("\n")}` : "";
  return `${heading}\n\n${table}\n${footer}${footer ? "\n" : ""}`;
}

/** How the run was taken: rounds, log verbosity, where the children's output went. */
export function methodLines(r: BenchResults): string[] {
  return [
    ...(r.rounds
      ? [`rounds: ${r.rounds}, every system once per round, order reversed every other round`]
      : []),
    ...(r.verbosity ? [`log verbosity: ${r.verbosity}`] : []),
    ...(r.outputDir ? [`child process output: ${r.outputDir}/<scenario>/<process>.log`] : []),
  ];
}

export function renderResults(r: BenchResults, markdown: boolean): string {
  const lines = [...machineLines(r.machine), ...methodLines(r)];
  const head = markdown
    ? [`Command: \`${r.command}\` (${r.startedAt})`, "", ...lines.map((l) => `- ${l}`)]
    : [`${r.command}  (${r.startedAt})`, ...lines];
  const legend =
    "↑ higher is better, ↓ lower is better. MB/s = 10^6 bytes/s. Figures are medians over rounds, " +
    "[min–max] their range; ratios are kgw divided by the baseline, taken within each round " +
    "(median [range]). Targets are the issue's." +
    (r.scenarios.some(hasTenant)
      ? " tenant mode/kgw is kgw in tenant mode divided by kgw, taken within each round likewise."
      : "") +
    (r.scenarios.some(hasNoisy)
      ? " noisy/alone is the quiet tenant's figure next to the noisy tenant divided by its figure alone, taken within each round likewise."
      : "");
  return [...head, "", ...r.scenarios.map((s) => renderScenario(s, markdown)), legend, ""].join("\n");
}
