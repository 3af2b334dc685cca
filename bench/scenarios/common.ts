/**
 * Helpers shared by scenarios: collecting repeated samples per measured path, turning them into
 * table cells, and starting the upstream stacks only when the upstream column is on, and kgw in
 * tenant mode only with --tenant-mode.
 */
import { type FrontendMode, type StackOptions, startUpstream, type TunnelStack } from "../harness/stacks.js";
import { median, percentile } from "../harness/stats.js";
import { startKgwTenant, type TenantStack } from "../harness/tenant-stack.js";
import { type BenchContext, type Cell, type System, TENANT_SYSTEM } from "../harness/types.js";
import { errorMessage } from "../harness/util.js";

/**
 * Samples per key; a key that failed once keeps its error and is not measured again (so the
 * samples of the keys that did not fail stay aligned with the rounds).
 */
export class Samples {
  private readonly values = new Map<string, number[]>();
  private readonly errors = new Map<string, string>();
  private readonly byRound = new Map<string, number[][]>();

  constructor(private readonly ctx: BenchContext) {}

  failed(key: string): boolean {
    return this.errors.has(key);
  }

  fail(key: string, err: unknown): void {
    const message = errorMessage(err);
    this.errors.set(key, message);
    this.ctx.log(`  ${key}: ${message.split("\n")[0]}`);
  }

  /** Runs `measure` unless `key` already failed; records its value or its error. */
  async take(key: string, measure: () => Promise<number>): Promise<void> {
    if (this.failed(key)) return;
    try {
      const v = await measure();
      const list = this.values.get(key) ?? [];
      list.push(v);
      this.values.set(key, list);
    } catch (err) {
      this.fail(key, err);
    }
  }

  /**
   * Runs `measure` unless `key` already failed; keeps all the values it returns (one round's dial
   * latencies, say) as that round's.
   */
  async takeRound(key: string, measure: () => Promise<number[]>): Promise<void> {
    if (this.failed(key)) return;
    try {
      const v = await measure();
      this.byRound.set(key, [...(this.byRound.get(key) ?? []), v]);
    } catch (err) {
      this.fail(key, err);
    }
  }

  /** The p-th percentile of each round `takeRound` kept for `key`, as a cell. */
  percentileCell(key: string, p: number): Cell {
    const error = this.errors.get(key);
    if (error) return { error };
    return roundsCell((this.byRound.get(key) ?? []).map((r) => percentile(r, p)));
  }

  /**
   * `key`'s samples as a cell: their median, and each as the figure of its round (scenarios take
   * one sample per key per round, in round order).
   */
  cell(key: string, note?: string): Cell {
    const error = this.errors.get(key);
    if (error) return { error };
    const samples = this.values.get(key);
    if (!samples || samples.length === 0) return { error: "not measured" };
    return { ...roundsCell(samples), note };
  }
}

/** A cell from one figure per round: their median, or an error when one is not a number. */
export function roundsCell(rounds: number[]): Cell {
  if (rounds.length === 0) return { error: "not measured" };
  if (!rounds.every(Number.isFinite)) return { error: "no value" };
  // Six digits are plenty, and the JSON stays readable; the median is of what is kept.
  const kept = rounds.map((v) => Number(v.toPrecision(6)));
  return { value: median(kept), rounds: kept };
}

/** The upstream cell when the column is off. */
export function upstreamNa(ctx: BenchContext): Cell {
  return { na: ctx.upstreamNa };
}

/**
 * Upstream proxy-servers (one per mode asked, each with its agent) when the column is on;
 * a failure to start is reported for that mode instead of failing the scenario.
 */
export async function startUpstreams(
  ctx: BenchContext,
  modes: FrontendMode[],
  opts: StackOptions = {},
): Promise<Partial<Record<FrontendMode, TunnelStack | Error>>> {
  const out: Partial<Record<FrontendMode, TunnelStack | Error>> = {};
  if (!ctx.upstream) return out;
  await Promise.all(
    modes.map(async (mode) => {
      try {
        out[mode] = await startUpstream(ctx, mode, opts);
      } catch (err) {
        ctx.log(`  upstream ${mode}: ${errorMessage(err).split("\n")[0]}`);
        out[mode] = err instanceof Error ? err : new Error(String(err));
      }
    }),
  );
  return out;
}

/** For rows whose upstream figure comes from `stack`: n/a, the start error, or measure. */
export function upstreamCell(
  ctx: BenchContext,
  stack: TunnelStack | Error | undefined,
  cell: () => Cell,
): Cell {
  if (!ctx.upstream) return upstreamNa(ctx);
  if (stack === undefined) return { na: "not measured" };
  if (stack instanceof Error) return { error: stack.message };
  return cell();
}

/**
 * kgw in tenant mode when the run asks for it (--tenant-mode), else null; a failure to start is
 * reported in its cells instead of failing the scenario (kgw's figures do not depend on it).
 */
export async function startTenantIfAsked(
  ctx: BenchContext,
  opts: StackOptions = {},
): Promise<TenantStack | Error | null> {
  if (!ctx.options.tenantMode) return null;
  try {
    return await startKgwTenant(ctx, opts);
  } catch (err) {
    ctx.log(`  kgw tenant mode: ${errorMessage(err).split("\n")[0]}`);
    return err instanceof Error ? err : new Error(String(err));
  }
}

/**
 * A row's kgw-tenant cell, spread into its cells: none without --tenant-mode, so the table shows
 * no tenant columns; the start error; or the figure.
 */
export function tenantCell(
  tenant: TenantStack | Error | null,
  cell: () => Cell,
): Partial<Record<System, Cell>> {
  if (tenant === null) return {};
  return { [TENANT_SYSTEM]: tenant instanceof Error ? { error: tenant.message } : cell() };
}
