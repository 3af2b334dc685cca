/**
 * Every interval, reads the gateway's prom-client registry and writes its metrics as EMF
 * documents (emf-document.ts) through an injected `write`: gauges as they are, counters as their
 * increase since the previous set, breakdowns only where they grew. The clock and the timer are
 * injected, so tests drive it without waiting.
 */
import type { MetricObjectWithValues, MetricValue, Registry } from "prom-client";
import type { Logger } from "../../observability/logger.js";
import {
  BREAKDOWN_OTHER,
  type EmfBreakdownSpec,
  type EmfMetricSpec,
  GATEWAY_EMF_BREAKDOWNS,
  GATEWAY_EMF_METRICS,
  MAX_BREAKDOWN_VALUES,
} from "./emf-catalog.js";
import {
  breakdownDocuments,
  type EmfBreakdownValue,
  type EmfContext,
  type EmfMetricValue,
  instanceDocuments,
} from "./emf-document.js";

export interface Scheduled {
  cancel(): void;
}

export interface EmfPublisherDeps {
  registry: Registry;
  /** Writes one document (a line without its newline). */
  write: (line: string) => void;
  now: () => number;
  /** Runs `fn` once after `ms`; the publisher schedules its next run when one ends. */
  schedule: (fn: () => void, ms: number) => Scheduled;
  log: Logger;
  /** Counts a set that could not be read or written (kgw_server_metrics_emf_errors_total). */
  onError: () => void;
  metrics?: Readonly<Record<string, EmfMetricSpec>>;
  breakdowns?: Readonly<Record<string, EmfBreakdownSpec>>;
}

type Series = MetricValue<string>[];

export class EmfPublisher {
  /** Counters' totals at the previous set, by metric name or breakdown name and value. */
  private readonly previous = new Map<string, number>();
  private timer: Scheduled | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly ctx: EmfContext,
    private readonly intervalMs: number,
    private readonly deps: EmfPublisherDeps,
  ) {}

  start(): void {
    if (this.stopped || this.timer) return;
    this.timer = this.deps.schedule(() => this.tick(), this.intervalMs);
  }

  /**
   * Stops the timer and writes a last set of counters: what the instance counted since the
   * previous set. No gauges: a stopping instance has let its agents, tunnels and lease go, and
   * those zeros would read as an instance without its lease (LeaseHeld's fleet Minimum) in every
   * rolling deployment.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.timer?.cancel();
    this.timer = null;
    await this.running;
    await this.publish({ countersOnly: true });
  }

  /** Reads the registry and writes one set of documents; failures are logged and counted. */
  async publish(opts: { countersOnly?: boolean } = {}): Promise<void> {
    try {
      const snapshot = new Map<string, Series>();
      for (const m of (await this.deps.registry.getMetricsAsJSON()) as MetricObjectWithValues<
        MetricValue<string>
      >[]) {
        snapshot.set(m.name, m.values);
      }
      const timestamp = this.deps.now();
      const lines = [
        ...instanceDocuments(this.ctx, timestamp, this.metricValues(snapshot, opts.countersOnly ?? false)),
        ...breakdownDocuments(this.ctx, timestamp, this.breakdownValues(snapshot)),
      ];
      for (const l of lines) this.deps.write(l);
    } catch (err) {
      this.deps.onError();
      this.deps.log.warn(
        { err: (err as Error).message },
        "cannot write the metrics for CloudWatch (EMF); next try at the next interval",
      );
    }
  }

  private tick(): void {
    this.running = this.publish().finally(() => {
      this.running = null;
      if (!this.stopped) this.timer = this.deps.schedule(() => this.tick(), this.intervalMs);
    });
  }

  private metricValues(snapshot: Map<string, Series>, countersOnly: boolean): EmfMetricValue[] {
    const out: EmfMetricValue[] = [];
    for (const spec of Object.values(this.deps.metrics ?? GATEWAY_EMF_METRICS)) {
      if (countersOnly && spec.kind !== "counter") continue;
      let total = 0;
      let present = false;
      for (const source of spec.sources) {
        const series = snapshot.get(source.metric);
        if (!series) continue;
        present = true;
        for (const s of series) {
          if (source.where && !source.where.values.includes(String(s.labels[source.where.label]))) continue;
          total += s.value;
        }
      }
      // A metric whose series this instance does not have (no fleet: no lease) is not written.
      if (!present) continue;
      out.push({ spec, value: spec.kind === "counter" ? this.increase(spec.name, total) : total });
    }
    return out;
  }

  private breakdownValues(snapshot: Map<string, Series>): EmfBreakdownValue[] {
    const out: EmfBreakdownValue[] = [];
    for (const spec of Object.values(this.deps.breakdowns ?? GATEWAY_EMF_BREAKDOWNS)) {
      const totals = new Map<string, number>();
      for (const source of spec.sources) {
        for (const s of snapshot.get(source.metric) ?? []) {
          const key = source.value(s.labels);
          totals.set(key, (totals.get(key) ?? 0) + s.value);
        }
      }
      const grown = [...totals]
        .map(([key, total]) => ({
          key,
          value: this.increase(`${spec.name}\u0000${spec.dimension}\u0000${key}`, total),
        }))
        .filter((v) => v.value > 0)
        .sort((a, b) => b.value - a.value);
      const named = grown.length > MAX_BREAKDOWN_VALUES ? grown.slice(0, MAX_BREAKDOWN_VALUES - 1) : grown;
      const rest = grown.slice(named.length).reduce((sum, v) => sum + v.value, 0);
      for (const v of named) out.push({ spec, ...v });
      if (rest > 0) out.push({ spec, key: BREAKDOWN_OTHER, value: rest });
    }
    return out;
  }

  /** A counter's increase since the previous set; a counter that went down was reset. */
  private increase(key: string, total: number): number {
    const before = this.previous.get(key) ?? 0;
    this.previous.set(key, total);
    return total >= before ? total - before : total;
  }
}
