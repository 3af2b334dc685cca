/**
 * `--metrics-emf-interval`: the gateway's metrics as CloudWatch EMF documents on stdout
 * (lib/metrics/emf/), on a pino destination of their own like the audit log's: never blocking
 * the event loop, each document one write of at most PIPE_BUF bytes, so lines on the shared
 * stdout never cut into each other. The deployment's log router sends them to the metrics log
 * group (cdk/log-router/kgw.conf).
 */
import { pino } from "pino";
import type { MetricsEmfOptions } from "../config/metrics-emf-options.js";
import { EMF_MAX_LINE_BYTES } from "../metrics/emf/emf-document.js";
import { EmfPublisher } from "../metrics/emf/emf-publisher.js";
import type { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import { EMF_CLOSE_TIMEOUT_MS } from "./durations.js";

/**
 * Bytes buffered while stdout is slower than the documents come: a day of one-minute sets. Past
 * it sets are dropped and counted rather than memory growing.
 */
const EMF_BUFFER_BYTES = 4 * 1024 * 1024;

export interface MetricsEmf {
  /** Writes a last set (what was counted since the previous one) and flushes it. */
  stop(): Promise<void>;
}

export function startMetricsEmf(
  options: MetricsEmfOptions,
  instance: string,
  deps: { metrics: ServerMetrics; log: Logger },
): MetricsEmf {
  const log = deps.log.child({ component: "metrics-emf" });
  const dest = pino.destination({
    dest: 1,
    sync: false,
    maxWrite: EMF_MAX_LINE_BYTES,
    maxLength: EMF_BUFFER_BYTES,
  });
  const onError = () => deps.metrics.emfErrors.inc();
  dest.on("error", (err: Error) => {
    onError();
    log.warn({ err: err.message }, "cannot write the metrics for CloudWatch to stdout");
  });
  dest.on("drop", onError);
  const publisher = new EmfPublisher(
    { namespace: options.namespace, fleet: options.fleet, instance },
    options.intervalMs,
    {
      registry: deps.metrics.registry,
      write: (line) => dest.write(`${line}\n`),
      now: Date.now,
      schedule: (fn, ms) => {
        const timer = setTimeout(fn, ms);
        // The gateway's listeners keep the process; this timer must not hold a stopping one.
        timer.unref();
        return { cancel: () => clearTimeout(timer) };
      },
      log,
      onError,
    },
  );
  publisher.start();
  log.info(
    { intervalMs: options.intervalMs, namespace: options.namespace, fleet: options.fleet },
    "metrics for CloudWatch (EMF) on stdout",
  );
  return {
    stop: async () => {
      await publisher.stop();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          log.warn("the last metrics for CloudWatch were not flushed in time");
          dest.destroy();
          resolve();
        }, EMF_CLOSE_TIMEOUT_MS);
        dest.once("close", () => {
          clearTimeout(timer);
          resolve();
        });
        dest.end();
      });
    },
  };
}
