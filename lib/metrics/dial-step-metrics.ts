/**
 * kgw_server_dial_step_seconds{step}: the time each step of a CONNECT dial took inside the server
 * (lib/observability/dial-steps.ts), registered only with --dial-step-metrics. A profiling aid:
 * its sum over its count is the mean per step, what the dial path's cost table reports.
 */
import { Histogram } from "prom-client";
import { DialStepClock, type DialStepRecorder, type DialStepsFactory } from "../observability/dial-steps.js";
import type { ServerMetrics } from "./server-metrics.js";

/** From 10 µs (a map lookup with a log line) to 100 ms (an agent behind a slow link). */
const STEP_BUCKETS = [0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.01, 0.1];

/** Registers the histogram on `metrics` and returns what starts each dial's clock. */
export function dialStepMetrics(metrics: ServerMetrics): DialStepsFactory {
  const histogram = new Histogram({
    name: "kgw_server_dial_step_seconds",
    help: "Time each step of a CONNECT dial took in the server (only with --dial-step-metrics).",
    labelNames: ["step"] as const,
    buckets: STEP_BUCKETS,
    registers: [metrics.registry],
  });
  const record: DialStepRecorder = (step, seconds) => histogram.observe({ step }, seconds);
  return () => new DialStepClock(record);
}
