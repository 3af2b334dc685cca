/**
 * `kgw server`'s CloudWatch metrics flags (lib/metrics/emf/): how often the gateway writes an
 * embedded metric format (EMF) document of its metrics to stdout, and under which namespace.
 * Off unless --metrics-emf-interval is set; the AWS deployment turns it on
 * (cdk/lib/gateway-command.ts) and its log router sends the documents to CloudWatch.
 */
import { ConfigError } from "../errors.js";
import { DEFAULT_EMF_NAMESPACE, STANDALONE_FLEET } from "../metrics/emf/emf-catalog.js";
import { defineFlags, type FlagValues } from "./flags.js";

/**
 * Bounds of the interval. Below 10 s the documents cost more log ingestion than they tell
 * (CloudWatch keeps custom metrics at 60 s resolution); above an hour a dashboard or an alarm
 * waits too long for its first point.
 */
export const MIN_EMF_INTERVAL_MS = 10_000;
export const MAX_EMF_INTERVAL_MS = 3_600_000;

export const METRICS_EMF_FLAGS = defineFlags({
  "metrics-emf-interval": {
    kind: "duration",
    default: 0,
    help: "Write the gateway's metrics to stdout as one CloudWatch embedded metric format document set this often (e.g. 60s), for a log router to send to CloudWatch; 0: off.",
  },
  "metrics-emf-namespace": {
    kind: "string",
    default: DEFAULT_EMF_NAMESPACE,
    help: "With --metrics-emf-interval: the CloudWatch namespace of those metrics.",
  },
});

export interface MetricsEmfOptions {
  intervalMs: number;
  namespace: string;
  /** The Fleet dimension's value: the registry table (one fleet per table), or "standalone". */
  fleet: string;
}

/** CloudWatch's namespace characters; "AWS/" is reserved for AWS's own. */
const NAMESPACE = /^[A-Za-z0-9._\-/#: ]{1,255}$/;

/** The EMF options, or null when off; `registryTable` is --registry-table ("" without a fleet). */
export function parseMetricsEmf(
  f: FlagValues<typeof METRICS_EMF_FLAGS>,
  registryTable: string,
): MetricsEmfOptions | null {
  const intervalMs = f["metrics-emf-interval"];
  const namespace = f["metrics-emf-namespace"];
  if (!NAMESPACE.test(namespace) || namespace.startsWith("AWS/") || namespace.startsWith(":")) {
    throw new ConfigError(
      `--metrics-emf-namespace: "${namespace}" is not a CloudWatch namespace (1-255 of letters, digits and . - _ / # : space; not AWS/)`,
    );
  }
  if (intervalMs === 0) return null;
  if (intervalMs < MIN_EMF_INTERVAL_MS || intervalMs > MAX_EMF_INTERVAL_MS) {
    throw new ConfigError("--metrics-emf-interval must be 0 (off) or from 10s to 1h");
  }
  return { intervalMs, namespace, fleet: registryTable || STANDALONE_FLEET };
}
