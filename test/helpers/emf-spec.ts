/**
 * The rules of CloudWatch's embedded metric format specification ("Specification: Embedded
 * metric format", CloudWatch User Guide), written from the specification and not from our
 * builder, so a test that checks documents with it checks them against CloudWatch's rules.
 * Returns the problems found; none means the document is one CloudWatch extracts metrics from.
 */

/** CloudWatch's units (MetricDatum.Unit), the only values `Unit` may take. */
const UNITS = new Set([
  "Seconds",
  "Microseconds",
  "Milliseconds",
  "Bytes",
  "Kilobytes",
  "Megabytes",
  "Gigabytes",
  "Terabytes",
  "Bits",
  "Kilobits",
  "Megabits",
  "Gigabits",
  "Terabits",
  "Percent",
  "Count",
  "Bytes/Second",
  "Kilobytes/Second",
  "Megabytes/Second",
  "Gigabytes/Second",
  "Terabytes/Second",
  "Bits/Second",
  "Kilobits/Second",
  "Megabits/Second",
  "Gigabits/Second",
  "Terabits/Second",
  "Count/Second",
  "None",
]);

/** A log event is at most 256 KiB; an EMF document is one log event. */
const MAX_EVENT_BYTES = 256 * 1024;
const MAX_DIMENSIONS_PER_SET = 30;
const MAX_METRICS_PER_DIRECTIVE = 100;
const MAX_VALUES_PER_METRIC = 100;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/** Members other than `allowed`: the specification's objects MUST NOT have any. */
const extra = (o: Record<string, unknown>, allowed: string[]) =>
  Object.keys(o).filter((k) => !allowed.includes(k));

export function emfProblems(line: string): string[] {
  const problems: string[] = [];
  if (Buffer.byteLength(line) > MAX_EVENT_BYTES) problems.push("larger than a log event (256 KiB)");
  let root: unknown;
  try {
    root = JSON.parse(line);
  } catch {
    return ["not JSON"];
  }
  if (!isObject(root)) return ["the root is not an object"];
  const aws = root._aws;
  if (!isObject(aws)) return ["no _aws metadata object"];
  problems.push(
    ...extra(aws, ["Timestamp", "CloudWatchMetrics"]).map((k) => `_aws has an unknown member ${k}`),
  );
  if (typeof aws.Timestamp !== "number" || !Number.isInteger(aws.Timestamp) || aws.Timestamp < 0) {
    problems.push("_aws.Timestamp is not milliseconds since the epoch");
  }
  if (!Array.isArray(aws.CloudWatchMetrics)) return [...problems, "_aws.CloudWatchMetrics is not an array"];
  for (const [i, d] of aws.CloudWatchMetrics.entries()) {
    const at = `CloudWatchMetrics[${i}]`;
    if (!isObject(d)) {
      problems.push(`${at} is not an object`);
      continue;
    }
    problems.push(
      ...extra(d, ["Namespace", "Dimensions", "Metrics"]).map((k) => `${at} has an unknown member ${k}`),
    );
    if (typeof d.Namespace !== "string" || d.Namespace.length < 1 || d.Namespace.length > 255) {
      problems.push(`${at}.Namespace is not a string of 1-255 characters`);
    }
    if (!Array.isArray(d.Dimensions)) problems.push(`${at}.Dimensions is not an array`);
    else {
      for (const set of d.Dimensions) {
        if (!Array.isArray(set) || set.some((k) => typeof k !== "string")) {
          problems.push(`${at}: a dimension set is not an array of strings`);
          continue;
        }
        if (set.length > MAX_DIMENSIONS_PER_SET)
          problems.push(`${at}: a dimension set of ${set.length} keys`);
        for (const key of set as string[]) {
          const v = root[key];
          if (typeof v !== "string" || v.length === 0) {
            problems.push(`${at}: dimension ${key} is not a non-empty string member of the root`);
          }
        }
      }
    }
    if (!Array.isArray(d.Metrics)) {
      problems.push(`${at}.Metrics is not an array`);
      continue;
    }
    if (d.Metrics.length > MAX_METRICS_PER_DIRECTIVE) problems.push(`${at}: ${d.Metrics.length} metrics`);
    for (const m of d.Metrics) {
      if (!isObject(m) || typeof m.Name !== "string" || m.Name.length < 1 || m.Name.length > 1024) {
        problems.push(`${at}: a metric without a Name of 1-1024 characters`);
        continue;
      }
      problems.push(
        ...extra(m, ["Name", "Unit", "StorageResolution"]).map((k) => `${m.Name} has an unknown member ${k}`),
      );
      if (m.Unit !== undefined && !UNITS.has(m.Unit as string))
        problems.push(`${m.Name}: unit ${String(m.Unit)}`);
      if (m.StorageResolution !== undefined && m.StorageResolution !== 1 && m.StorageResolution !== 60) {
        problems.push(`${m.Name}: StorageResolution is not 1 or 60`);
      }
      const v = root[m.Name];
      const numbers = Array.isArray(v) ? v : [v];
      if (numbers.length === 0 || numbers.length > MAX_VALUES_PER_METRIC) {
        problems.push(`${m.Name}: ${numbers.length} values`);
      }
      if (numbers.some((n) => typeof n !== "number" || !Number.isFinite(n))) {
        problems.push(`${m.Name} is not a number (or an array of numbers) member of the root`);
      }
    }
  }
  return problems;
}
