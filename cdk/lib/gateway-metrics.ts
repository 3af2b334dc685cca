/**
 * The gateway's own metrics in CloudWatch, as the dashboard and the alarms read them: the names,
 * namespace and dimensions come from lib/metrics/emf/emf-catalog.ts, which the gateway writes
 * them from (kgw server --metrics-emf-interval, set in gateway-command.ts).
 */
import type { Duration } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import {
  DEFAULT_EMF_NAMESPACE,
  EMF_DIMENSIONS,
  type EmfBreakdownSpec,
  type EmfMetricSpec,
  GATEWAY_EMF_BREAKDOWNS,
  GATEWAY_EMF_METRICS,
} from "../../lib/metrics/emf/emf-catalog.js";

export { GATEWAY_EMF_BREAKDOWNS, GATEWAY_EMF_METRICS };

/**
 * How often the tasks write their metrics: CloudWatch's standard resolution, so every one-minute
 * point holds one set of each instance and a gauge's Sum over the instances is the fleet's.
 */
export const EMF_INTERVAL_SECONDS = 60;

export type FleetWideMetric = EmfMetricSpec & { fleetWide: true };

/** A fleet-wide metric (dimension Fleet alone): what alarms read, CloudWatch adding the instances. */
export function fleetMetric(
  spec: FleetWideMetric,
  fleet: string,
  opts: { statistic: string; period: Duration; label?: string },
): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: DEFAULT_EMF_NAMESPACE,
    metricName: spec.name,
    dimensionsMap: { [EMF_DIMENSIONS.fleet]: fleet },
    ...opts,
  });
}

/** Each instance's series of `spec` (dimensions Fleet and Instance), for graphs. */
export function perInstance(
  spec: EmfMetricSpec,
  fleet: string,
  statistic: string,
  period: Duration,
): cloudwatch.SearchExpression {
  return new cloudwatch.SearchExpression({
    expression: search([EMF_DIMENSIONS.fleet, EMF_DIMENSIONS.instance], spec.name, fleet, statistic, period),
    label: "",
    period,
  });
}

/** A breakdown's series, one per value of its dimension (an outcome, a refusal reason). */
export function perValue(
  spec: EmfBreakdownSpec,
  fleet: string,
  period: Duration,
): cloudwatch.SearchExpression {
  return new cloudwatch.SearchExpression({
    expression: search([EMF_DIMENSIONS.fleet, spec.dimension], spec.name, fleet, "Sum", period),
    label: "",
    period,
  });
}

/** A SEARCH of exactly these dimensions (the schema), this metric name, this fleet. */
export function search(
  dimensions: string[],
  metricName: string,
  fleet: string,
  statistic: string,
  period: Duration,
): string {
  const schema = [DEFAULT_EMF_NAMESPACE, ...dimensions].map((d) => `"${d}"`).join(",");
  return `SEARCH('{${schema}} MetricName="${metricName}" ${EMF_DIMENSIONS.fleet}="${fleet}"', '${statistic}', ${period.toSeconds()})`;
}
