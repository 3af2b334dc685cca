import { Duration } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as actions from "aws-cdk-lib/aws-cloudwatch-actions";
import type * as dynamodb from "aws-cdk-lib/aws-dynamodb";
import type * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import * as logs from "aws-cdk-lib/aws-logs";
import * as sns from "aws-cdk-lib/aws-sns";
import { Construct } from "constructs";
import type { DialOutcome } from "../../../lib/server/audit/audit-record.js";

/** The namespace of the metrics the stack derives from the gateway's audit log. */
export const METRIC_NAMESPACE = "kgw";

/**
 * Outcomes that say the gateway (or the fleet's routing) failed a dial: nothing reached an
 * agent that should have (unavailable), no answer in time (timeout), a tunnel that broke after it
 * was up (broken: agents lost mid-tunnel, a deployment that dropped tunnels) or an internal
 * error (failed). Left out: refused (the destination refused; the tenant's backend), denied
 * (policy and quota did their job) and cancelled (the caller gave up).
 */
export const FAILED_DIAL_OUTCOMES: readonly DialOutcome[] = ["unavailable", "timeout", "broken", "failed"];

export interface GatewayAlarmsProps {
  auditLogGroup: logs.ILogGroup;
  loadBalancer: elbv2.NetworkLoadBalancer;
  targetGroups: Record<string, elbv2.NetworkTargetGroup>;
  table: dynamodb.ITableV2;
  /** Fewer healthy tasks than this is an alarm (the service's minimum). */
  minHealthyTasks: number;
  alarmTopicArn: string | null;
}

/**
 * The alarms of a deployment, each one cheap ($0.10 a month) and each naming what to look at.
 *
 * Dial failures come from the audit log through CloudWatch Logs metric filters: the audit
 * stream is already in CloudWatch, so this needs no metrics exporter in the task (no ADOT
 * collector, no EMF) and counts exactly the dials tenants made.
 */
export class GatewayAlarms extends Construct {
  readonly alarms: cloudwatch.Alarm[] = [];

  constructor(scope: Construct, id: string, props: GatewayAlarmsProps) {
    super(scope, id);
    const topic = props.alarmTopicArn
      ? sns.Topic.fromTopicArn(this, "Topic", props.alarmTopicArn)
      : undefined;
    const add = (alarm: cloudwatch.Alarm): void => {
      if (topic) {
        alarm.addAlarmAction(new actions.SnsAction(topic));
        alarm.addOkAction(new actions.SnsAction(topic));
      }
      this.alarms.push(alarm);
    };

    for (const [name, targetGroup] of Object.entries(props.targetGroups)) {
      add(
        new cloudwatch.Alarm(this, `${name}UnhealthyHosts`, {
          alarmDescription: `kgw: a task fails the ${name} target group's health check (/healthz) for 3 minutes; see the task's ops log`,
          metric: targetGroup.metrics.unHealthyHostCount({
            period: Duration.minutes(1),
            statistic: "Maximum",
          }),
          threshold: 1,
          comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 3,
          treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
        }),
      );
    }
    const gateway = Object.values(props.targetGroups)[0]!;
    add(
      new cloudwatch.Alarm(this, "TooFewHealthyTasks", {
        alarmDescription: `kgw: fewer than ${props.minHealthyTasks} healthy tasks for 5 minutes: one AZ or one task from an outage`,
        metric: gateway.metrics.healthyHostCount({ period: Duration.minutes(1), statistic: "Minimum" }),
        threshold: props.minHealthyTasks,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: 5,
        datapointsToAlarm: 5,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      }),
    );

    // One record per dial; the JSON fields are the audit record's (lib/server/audit/audit-record.ts).
    const dials = new logs.MetricFilter(this, "DialsFilter", {
      logGroup: props.auditLogGroup,
      metricNamespace: METRIC_NAMESPACE,
      metricName: "Dials",
      filterPattern: logs.FilterPattern.exists("$.outcome"),
      metricValue: "1",
      defaultValue: 0,
    });
    const failures = new logs.MetricFilter(this, "FailedDialsFilter", {
      logGroup: props.auditLogGroup,
      metricNamespace: METRIC_NAMESPACE,
      metricName: "FailedDials",
      filterPattern: logs.FilterPattern.any(
        ...FAILED_DIAL_OUTCOMES.map((o) => logs.FilterPattern.stringValue("$.outcome", "=", o)),
      ),
      metricValue: "1",
      defaultValue: 0,
    });
    const period = Duration.minutes(5);
    add(
      new cloudwatch.Alarm(this, "DialFailures", {
        alarmDescription: `kgw: over 5% of dials failed (${FAILED_DIAL_OUTCOMES.join(", ")}) in 3 consecutive 5-minute periods with at least 20 dials; the audit log says which tenant (docs/DEPLOY.md)`,
        metric: new cloudwatch.MathExpression({
          expression: "IF(dials >= 20, 100 * failed / dials, 0)",
          usingMetrics: {
            dials: dials.metric({ statistic: "Sum", period }),
            failed: failures.metric({ statistic: "Sum", period }),
          },
          period,
          label: "failed dials (%)",
        }),
        threshold: 5,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        datapointsToAlarm: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );

    // On-demand tables throttle too (a hot partition, a burst past twice the previous peak).
    // The registry retries with backoff, so a short blip is absorbed; five minutes is not.
    const throttlePeriod = Duration.minutes(1);
    const throttleMetric = (metricName: string) =>
      new cloudwatch.Metric({
        namespace: "AWS/DynamoDB",
        metricName,
        dimensionsMap: { TableName: props.table.tableName },
        statistic: "Sum",
        period: throttlePeriod,
      });
    add(
      new cloudwatch.Alarm(this, "RegistryThrottling", {
        alarmDescription: "kgw: the registry table throttled requests in 5 consecutive minutes",
        metric: new cloudwatch.MathExpression({
          expression: "reads + writes",
          usingMetrics: {
            reads: throttleMetric("ReadThrottleEvents"),
            writes: throttleMetric("WriteThrottleEvents"),
          },
          period: throttlePeriod,
          label: "throttle events",
        }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 5,
        datapointsToAlarm: 5,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
  }
}
