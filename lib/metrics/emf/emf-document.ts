/**
 * CloudWatch embedded metric format (EMF) documents, built as JSON lines: pure, no I/O. The
 * rules they keep are the specification's ("Specification: Embedded metric format", CloudWatch
 * User Guide), checked by test/helpers/emf-spec.ts: a root `_aws` with `Timestamp` and
 * `CloudWatchMetrics`, each directive with a `Namespace`, dimension sets of at most 30 keys that
 * name string members of the root, and at most 100 metrics, each a number member of the root.
 */
import {
  EMF_DIMENSIONS,
  EMF_RECORD_FIELD,
  EMF_RECORD_VALUE,
  type EmfBreakdownSpec,
  type EmfMetricSpec,
  type EmfUnit,
} from "./emf-catalog.js";

/**
 * A line is at most PIPE_BUF (4096) bytes: one write of it to the pipe behind stdout is atomic,
 * so it never interleaves with the log's and the audit trail's lines, and it stays below the
 * 16 KiB at which container runtimes split a line into partial messages.
 */
export const EMF_MAX_LINE_BYTES = 4096;

/** The specification's bound on metrics in one directive. */
export const EMF_MAX_METRICS_PER_DIRECTIVE = 100;

/** CloudWatch cuts nothing for us: a dimension value is at most this long. */
export const EMF_MAX_DIMENSION_VALUE_LENGTH = 255;

export interface EmfContext {
  namespace: string;
  fleet: string;
  instance: string;
}

export interface EmfMetricValue {
  spec: Pick<EmfMetricSpec, "name" | "unit" | "fleetWide">;
  value: number;
}

export interface EmfBreakdownValue {
  spec: Pick<EmfBreakdownSpec, "name" | "unit" | "dimension">;
  /** The dimension's value (an outcome, a refusal reason). */
  key: string;
  value: number;
}

interface Directive {
  Namespace: string;
  Dimensions: string[][];
  Metrics: { Name: string; Unit: EmfUnit }[];
}

const { fleet: FLEET, instance: INSTANCE } = EMF_DIMENSIONS;

/** A dimension value CloudWatch accepts: not empty, not too long. */
export const dimensionValue = (v: string): string =>
  v === "" ? "unknown" : v.slice(0, EMF_MAX_DIMENSION_VALUE_LENGTH);

function line(root: Record<string, unknown>, timestamp: number, directives: Directive[]): string {
  return JSON.stringify({
    [EMF_RECORD_FIELD]: EMF_RECORD_VALUE,
    ...root,
    _aws: { Timestamp: timestamp, CloudWatchMetrics: directives },
  });
}

/**
 * The instance's document(s): its metrics under [Fleet, Instance], and the fleet-wide ones under
 * [Fleet] too. Split in several documents when the metrics would not fit in one line.
 */
export function instanceDocuments(
  ctx: EmfContext,
  timestamp: number,
  values: readonly EmfMetricValue[],
): string[] {
  const finite = values.filter((v) => Number.isFinite(v.value));
  if (finite.length === 0) return [];
  const dims = { [FLEET]: dimensionValue(ctx.fleet), [INSTANCE]: dimensionValue(ctx.instance) };
  const render = (chunk: readonly EmfMetricValue[]): string => {
    const root: Record<string, unknown> = { ...dims };
    const directives: Directive[] = [];
    for (const fleetWide of [false, true]) {
      const metrics = chunk.filter((v) => v.spec.fleetWide === fleetWide);
      if (metrics.length === 0) continue;
      for (const v of metrics) root[v.spec.name] = v.value;
      directives.push({
        Namespace: ctx.namespace,
        Dimensions: fleetWide ? [[FLEET, INSTANCE], [FLEET]] : [[FLEET, INSTANCE]],
        Metrics: metrics.map((v) => ({ Name: v.spec.name, Unit: v.spec.unit })),
      });
    }
    return line(root, timestamp, directives);
  };
  return withinBounds(finite, render);
}

/** One document per breakdown value: [Fleet, <dimension>] only. */
export function breakdownDocuments(
  ctx: EmfContext,
  timestamp: number,
  values: readonly EmfBreakdownValue[],
): string[] {
  return values
    .filter((v) => Number.isFinite(v.value))
    .map((v) =>
      line(
        {
          [FLEET]: dimensionValue(ctx.fleet),
          [v.spec.dimension]: dimensionValue(v.key),
          [v.spec.name]: v.value,
        },
        timestamp,
        [
          {
            Namespace: ctx.namespace,
            Dimensions: [[FLEET, v.spec.dimension]],
            Metrics: [{ Name: v.spec.name, Unit: v.spec.unit }],
          },
        ],
      ),
    );
}

/** Renders `items` as one line, or halves them until every line fits the bounds. */
function withinBounds<T>(items: readonly T[], render: (chunk: readonly T[]) => string): string[] {
  const text = render(items);
  if (items.length <= EMF_MAX_METRICS_PER_DIRECTIVE && Buffer.byteLength(text) <= EMF_MAX_LINE_BYTES)
    return [text];
  if (items.length === 1) {
    throw new RangeError(
      `an EMF document of one metric is ${Buffer.byteLength(text)} bytes, over ${EMF_MAX_LINE_BYTES}`,
    );
  }
  const half = Math.ceil(items.length / 2);
  return [...withinBounds(items.slice(0, half), render), ...withinBounds(items.slice(half), render)];
}
