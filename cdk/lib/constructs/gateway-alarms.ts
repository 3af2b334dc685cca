import { Duration } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import * as actions from "aws-cdk-lib/aws-cloudwatch-actions";
import type * as dynamodb from "aws-cdk-lib/aws-dynamodb";
import type * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import type * as logs from "aws-cdk-lib/aws-logs";
import * as sns from "aws-cdk-lib/aws-sns";
import { Construct } from "constructs";
import { FAILED_DIAL_OUTCOMES } from "../../../lib/metrics/emf/emf-catalog.js";
import { fleetMetric, GATEWAY_EMF_METRICS } from "../gateway-metrics.js";

export interface GatewayAlarmsProps {
  /** The Fleet dimension of the gateway's metrics: its registry table's name. */
  fleet: string;
  /** Where the tasks' metrics documents go (CloudWatch reports the ones it rejects). */
  metricsLogGroup: logs.ILogGroup;
  loadBalancer: elbv2.NetworkLoadBalancer;
  targetGroups: Record<string, elbv2.NetworkTargetGroup>;
  table: dynamodb.ITableV2;
  /** Fewer healthy tasks than this is an alarm (the service's minimum). */
  minHealthyTasks: number;
  alarmTopicArn: string | null;
}

/**
 * The alarms of a deployment, each one cheap ($0.10 a month per metric it reads) and each naming
 * what to look at: the load balancer's and DynamoDB's own metrics, and the gateway's (written by
 * the tasks as embedded metric format documents, lib/metrics/emf/; fleet-wide, so an alarm does
 * not depend on which tasks exist).
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

    const emf = (spec: Parameters<typeof fleetMetric>[0], statistic: string, period: Duration) =>
      fleetMetric(spec, props.fleet, { statistic, period });
    const period = Duration.minutes(5);
    add(
      new cloudwatch.Alarm(this, "DialFailures", {
        alarmDescription: `kgw: over 5% of dials failed (${FAILED_DIAL_OUTCOMES.join(", ")}) in 3 consecutive 5-minute periods with at least 20 dials; the audit log says which tenant (docs/DEPLOY.md)`,
        metric: new cloudwatch.MathExpression({
          expression: "IF(dials >= 20, 100 * failed / dials, 0)",
          usingMetrics: {
            dials: emf(GATEWAY_EMF_METRICS.dials, "Sum", period),
            failed: emf(GATEWAY_EMF_METRICS.failedDials, "Sum", period),
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

    const minute = Duration.minutes(1);
    // The registry retries each call with backoff; what reaches this counter failed after them.
    // Minutes in a row of it is DynamoDB unreachable or refusing: routing runs from cache, but
    // leases expire and new agents are not found by other instances.
    add(
      new cloudwatch.Alarm(this, "RegistryErrors", {
        alarmDescription:
          "kgw: registry (DynamoDB) calls failed after their retries in 5 consecutive minutes; see the ops log (component fleet) and the table's metrics",
        metric: emf(GATEWAY_EMF_METRICS.registryErrors, "Sum", minute),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 5,
        datapointsToAlarm: 5,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // Minimum over the fleet's points: 0 as soon as one instance reports it holds no lease. Such
    // an instance is not routed to by its peers, so its tenants' dials arriving elsewhere fail.
    add(
      new cloudwatch.Alarm(this, "LeaseNotHeld", {
        alarmDescription:
          "kgw: an instance has not held its registry lease for 5 minutes (its agents are unreachable from other instances); see its ops log stream",
        metric: emf(GATEWAY_EMF_METRICS.leaseHeld, "Minimum", minute),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: 5,
        datapointsToAlarm: 5,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // The audit trail is a record of every dial: one lost record is worth a look.
    add(
      new cloudwatch.Alarm(this, "AuditRecordsDropped", {
        alarmDescription:
          "kgw: audit records were dropped because the audit log fell behind (stdout or the log router stalled); see the log router's stream in the ops log",
        metric: emf(GATEWAY_EMF_METRICS.auditDropped, "Sum", period),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        datapointsToAlarm: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
    // Every task writes Dials (0 or more) once a minute; no point for 5 minutes means the metrics
    // stopped reaching CloudWatch, and the alarms above went blind with them.
    add(
      new cloudwatch.Alarm(this, "MetricsMissing", {
        alarmDescription:
          "kgw: no metrics from any task for 5 minutes (tasks down, the log router failing, or documents rejected); the alarms on the gateway's metrics see nothing meanwhile",
        metric: emf(GATEWAY_EMF_METRICS.dials, "SampleCount", minute),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
        evaluationPeriods: 5,
        datapointsToAlarm: 5,
        treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      }),
    );
    // CloudWatch Logs counts the documents it could not turn into metrics, by log group.
    const logsMetric = (metricName: string) =>
      new cloudwatch.Metric({
        namespace: "AWS/Logs",
        metricName,
        dimensionsMap: { LogGroupName: props.metricsLogGroup.logGroupName },
        statistic: "Sum",
        period,
      });
    add(
      new cloudwatch.Alarm(this, "MetricsRejected", {
        alarmDescription:
          "kgw: CloudWatch rejected metrics documents from the tasks (EMF parsing or validation errors); read the metrics log group",
        metric: new cloudwatch.MathExpression({
          expression: "parsing + validation",
          usingMetrics: {
            parsing: logsMetric("EMFParsingErrors"),
            validation: logsMetric("EMFValidationErrors"),
          },
          period,
          label: "rejected documents",
        }),
        threshold: 1,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        datapointsToAlarm: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      }),
    );
  }
}
