/**
 * The benchmark's data model: a scenario produces rows; a row holds one figure per system
 * (ours, the two baselines, upstream, and with --tenant-mode ours in tenant mode) and the table
 * derives the ratios and target checks.
 */
import type { LogVolume, RunOutput } from "./output.js";
import type { BenchPki } from "./pki.js";
import type { Scope } from "./scope.js";
import type { UpstreamBinaries } from "./upstream.js";

/** MB/s is 10^6 bytes per second; KiB is 1024 bytes. */
export type Unit =
  | "MB/s"
  | "ms"
  /** CPU time per second of wall time (ms of CPU per s): 1,000 ms/s is one core. */
  | "ms/s"
  | "dials/s"
  | "conns/s"
  | "KiB"
  | "%"
  | "µs/MB"
  /** CPU microseconds per dial (peer-hop). */
  | "µs/dial"
  /** Microseconds: one step of a dial (dial-steps). */
  | "µs"
  | "req/s"
  | "req/dial"
  /** A count of agents (connections refused on their first try, say). */
  | "agents";

/** Which way is good for a row: throughput up, latency and memory down. */
export type Better = "higher" | "lower";

/** The systems every row compares, in table order. */
export const SYSTEMS = ["kgw", "direct", "relay", "upstream"] as const;
/**
 * kgw in tenant mode (bench/harness/tenant-stack.ts): only with --tenant-mode and only in the
 * scenarios that measure it, so only their rows have it and only their tables show its columns.
 */
export const TENANT_SYSTEM = "kgw-tenant";
/**
 * The `fairness` scenario's second figure: the quiet tenant next to a noisy tenant at its limits
 * (bench/scenarios/fairness.ts), its first being `kgw`, the quiet tenant alone. Only its rows have
 * it; their tables show these two and their ratio in place of the baselines.
 */
export const NOISY_SYSTEM = "kgw-noisy";
/**
 * The `peer-hop` scenario's second figure: a dial entering a fleet instance that forwards it to
 * the instance holding the tenant's agent (bench/scenarios/peer-hop.ts), its first being `kgw`,
 * the same dial entering that instance itself. Only its rows have it.
 */
export const HOP_SYSTEM = "kgw-hop";
export type System =
  | (typeof SYSTEMS)[number]
  | typeof TENANT_SYSTEM
  | typeof NOISY_SYSTEM
  | typeof HOP_SYSTEM;

/**
 * One figure. `value` is what the table shows (the median of `rounds` when the row was measured
 * in rounds); `na` says why a system has no figure for this row; `error` that measuring failed.
 */
export interface Cell {
  value?: number;
  /**
   * The figure of each round, in round order. When two cells of a row both have them, ratios are
   * taken round by round (a round measures every system within minutes of each other), and the
   * table shows their median and range.
   */
  rounds?: number[];
  /** Shown after the value, e.g. "at 9,800 connections". */
  note?: string;
  na?: string;
  error?: string;
}

/** A target from the issue, checked against the row when the table is printed. */
export type Target =
  | { kind: "ratioToRelay"; min: number }
  | { kind: "atLeast"; value: number }
  | { kind: "atMost"; value: number }
  | { kind: "upstream" }
  /** The peer hop's figure over the single instance's, per round, at least `min` (median). */
  | { kind: "hopRatio"; min: number }
  /** The peer hop's figure minus the single instance's, per round, below `ms` (median). */
  | { kind: "hopAdded"; ms: number };

export interface Row {
  /** Unique within its scenario; the smoke test and --json consumers key on it. */
  name: string;
  unit: Unit;
  better: Better;
  cells: Partial<Record<System, Cell>>;
  targets?: Target[];
  /** Ratios make no sense for rows that are already ratios (e.g. head-of-line "kept %"). */
  noRatios?: boolean;
}

export interface Sizes {
  /** Upper bound on bytes per throughput sample. */
  bulkBytes: number;
  /** Upper bound on the duration of one throughput sample. */
  bulkMaxMs: number;
  /** Sequential dials per latency figure, per round. */
  latencyDials: number;
  /** Duration of one sustained-dial-rate run and how many dialers run at once. */
  dialRateMs: number;
  dialConcurrency: number;
  /** Idle connection / agent counts for the memory scenario. */
  memoryCounts: number[];
  /** Measurement window of the head-of-line scenario, per sample. */
  holWindowMs: number;
  /** Warm-up transfer per path before throughput samples (JIT, buffers). */
  warmupMs: number;
  /** Warm-up dials per path before latency samples. */
  warmupDials: number;
  /** PING round trips per round-trip figure. */
  pings: number;
  /** Pause before reading RSS, for the process to finish what opening connections started. */
  settleMs: number;
  /** Upper bound on the time of one fairness dial-latency figure (at most latencyDials dials). */
  fairnessDialMs: number;
}

export interface BenchOptions {
  quick: boolean;
  /** Every system is measured once per round; figures are medians over rounds. */
  rounds: number;
  /** Where child processes write their output (default: a fresh directory under tmpdir). */
  outDir?: string;
  only: string[];
  upstream: "auto" | "on" | "off";
  /** Also measure kgw in tenant mode (throughput and dial), next to kgw in the same rounds. */
  tenantMode: boolean;
  json?: string;
  markdown: boolean;
  build: boolean;
  /** Write CPU profiles of the kgw processes into this directory. */
  profileDir?: string;
  /** throughput and wan measure only the transfers whose key matches (to profile one). */
  transfers?: RegExp;
  render?: string;
  list: boolean;
}

export interface BenchContext {
  options: BenchOptions;
  sizes: Sizes;
  pki: BenchPki;
  /** Upstream binaries, when the upstream column is enabled and they built. */
  upstream: UpstreamBinaries | null;
  /** Why the upstream column is empty, when it is. */
  upstreamNa: string;
  /** The hard limit on open files, which bounds the connection counts of the memory scenario. */
  fdLimit: number;
  /** Resources of the running scenario, released when it ends (in reverse order). */
  scope: Scope;
  /** The scenario's section of the run's output directory: one file per child process. */
  output: RunOutput;
  /** The machine's other load during each round of the running scenario (rounds.ts appends). */
  roundLoads: RoundLoad[];
  /** Progress on stderr. */
  log(message: string): void;
}

/** What else the machine did during one round. */
export interface RoundLoad {
  round: number;
  seconds: number;
  /** Cores used by processes that are neither the benchmark nor its children. */
  otherCores: number;
  /** Cores the hypervisor stole. */
  stealCores: number;
}

export interface Scenario {
  /** Short id for --only. */
  name: string;
  /** Heading of the scenario's table. */
  title: string;
  /** What it measures and how, one paragraph (printed by --list, mirrored in PERFORMANCE.md). */
  description: string;
  run(ctx: BenchContext): Promise<Row[]>;
}

export interface MachineInfo {
  cpu: string;
  cores: number;
  memoryGiB: number;
  kernel: string;
  node: string;
  go: string | null;
  upstreamVersion: string | null;
  fdLimit: number;
  commit: string;
}

export interface ScenarioResult {
  name: string;
  title: string;
  rows: Row[];
  /** Set when the scenario as a whole failed. */
  error?: string;
  seconds: number;
  /**
   * CPU used meanwhile by processes that are not the benchmark's (cores, averaged over the
   * scenario), and time the hypervisor stole: other work on the machine skews every figure.
   */
  otherCores: number;
  stealCores: number;
  /** The same per round (absent in results of older runs). */
  rounds?: RoundLoad[];
  /** What each child process wrote into its output file. */
  logs?: LogVolume[];
}

export interface BenchResults {
  command: string;
  startedAt: string;
  quick: boolean;
  /** Absent in results of older runs. */
  rounds?: number;
  /** How verbose each implementation's logging was (verbosity.ts). */
  verbosity?: string;
  /** The directory of the child processes' output files. */
  outputDir?: string;
  machine: MachineInfo;
  scenarios: ScenarioResult[];
}
