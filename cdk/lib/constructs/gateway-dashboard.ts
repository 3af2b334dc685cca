import { Duration, Stack } from "aws-cdk-lib";
import * as cloudwatch from "aws-cdk-lib/aws-cloudwatch";
import type * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import { Construct } from "constructs";
import {
  fleetMetric,
  GATEWAY_EMF_BREAKDOWNS,
  GATEWAY_EMF_METRICS,
  perInstance,
  perValue,
} from "../gateway-metrics.js";

export interface GatewayDashboardProps {
  /** The Fleet dimension of the gateway's metrics: its registry table's name. */
  fleet: string;
  loadBalancer: elbv2.NetworkLoadBalancer;
  gatewayTargetGroup: elbv2.NetworkTargetGroup;
  alarms: cloudwatch.IAlarm[];
}

const WIDTH = 8;
const HEIGHT = 6;

/**
 * One CloudWatch dashboard for the fleet (docs/DEPLOY.md, "Metrics and dashboard"): the alarms'
 * state, then dials (by outcome, failure rate), refusals by reason, agents, tunnels, the peer
 * hop's share of dials, registry errors and leases, per instance where that is the question.
 * Per-instance graphs are SEARCH expressions, so tasks that come and go appear without a deploy.
 */
export class GatewayDashboard extends Construct {
  readonly dashboard: cloudwatch.Dashboard;

  constructor(scope: Construct, id: string, props: GatewayDashboardProps) {
    super(scope, id);
    const m = GATEWAY_EMF_METRICS;
    const minute = Duration.minutes(1);
    const five = Duration.minutes(5);
    const fleet = (
      spec: Parameters<typeof fleetMetric>[0],
      statistic: string,
      period: Duration,
      label: string,
    ) => fleetMetric(spec, props.fleet, { statistic, period, label });
    const graph = (
      title: string,
      left: cloudwatch.IMetric[],
      extra: Partial<cloudwatch.GraphWidgetProps> = {},
    ) => new cloudwatch.GraphWidget({ title, left, width: WIDTH, height: HEIGHT, ...extra });

    this.dashboard = new cloudwatch.Dashboard(this, "Dashboard", {
      dashboardName: `${Stack.of(this).stackName}-gateway`,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new cloudwatch.AlarmStatusWidget({ title: "Alarms", alarms: props.alarms, width: 24, height: 4 }),
    );
    this.dashboard.addWidgets(
      graph(
        "Dials by outcome (fleet, per minute)",
        [perValue(GATEWAY_EMF_BREAKDOWNS.dialsByOutcome, props.fleet, minute)],
        {
          stacked: true,
        },
      ),
      graph("Failed dials (%)", [
        new cloudwatch.MathExpression({
          expression: "IF(dials > 0, 100 * failed / dials, 0)",
          usingMetrics: {
            dials: fleet(m.dials, "Sum", five, "dials"),
            failed: fleet(m.failedDials, "Sum", five, "failed"),
          },
          period: five,
          label: "failed dials (%)",
        }),
      ]),
      graph("Refusals by reason (fleet, per 5 minutes)", [
        perValue(GATEWAY_EMF_BREAKDOWNS.refusalsByReason, props.fleet, five),
      ]),
    );
    this.dashboard.addWidgets(
      graph("Agents per instance", [perInstance(m.agents, props.fleet, "Average", minute)]),
      graph("Tunnels per instance", [perInstance(m.tunnels, props.fleet, "Average", minute)]),
      graph("Dials per instance (per minute)", [perInstance(m.dials, props.fleet, "Sum", minute)]),
    );
    this.dashboard.addWidgets(
      graph("Peer hop: share of dials through another instance (%)", [
        new cloudwatch.MathExpression({
          expression: "IF(dials > 0, 100 * peer / dials, 0)",
          usingMetrics: {
            dials: fleet(m.dials, "Sum", five, "dials"),
            peer: fleet(m.peerDials, "Sum", five, "through a peer"),
          },
          period: five,
          label: "peer hop (%)",
        }),
      ]),
      graph("Registry errors and leases", [perInstance(m.registryErrors, props.fleet, "Sum", minute)], {
        right: [fleet(m.leaseHeld, "Minimum", minute, "lease held (fleet minimum)")],
      }),
      graph("Tunnel bytes per instance (per minute)", [
        perInstance(m.tunnelBytes, props.fleet, "Sum", minute),
      ]),
    );
    this.dashboard.addWidgets(
      // Per zone: each zone's node reports its own flows (gateway-scaling.ts says why).
      graph(
        "Load balancer: flows per zone, healthy tasks",
        [
          new cloudwatch.SearchExpression({
            expression: `SEARCH('{AWS/NetworkELB,AvailabilityZone,LoadBalancer} MetricName="ActiveFlowCount" LoadBalancer="${props.loadBalancer.loadBalancerFullName}"', 'Average', 60)`,
            label: "",
            period: minute,
          }),
        ],
        {
          right: [
            props.gatewayTargetGroup.metrics.healthyHostCount({
              statistic: "Minimum",
              label: "healthy tasks",
            }),
          ],
        },
      ),
      graph("Pending dials per instance", [perInstance(m.pendingDials, props.fleet, "Maximum", minute)]),
      graph("Audit records dropped (fleet)", [fleet(m.auditDropped, "Sum", five, "dropped")]),
    );
  }
}
