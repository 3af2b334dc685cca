import { Duration } from "aws-cdk-lib";
import * as appscaling from "aws-cdk-lib/aws-applicationautoscaling";
import type * as ecs from "aws-cdk-lib/aws-ecs";
import type * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import { Construct } from "constructs";

export interface GatewayScalingProps {
  service: ecs.FargateService;
  loadBalancer: elbv2.NetworkLoadBalancer;
  gatewayTargetGroup: elbv2.NetworkTargetGroup;
  /** The Availability Zones the load balancer has a node in (one node per enabled zone). */
  availabilityZones: readonly string[];
  minCount: number;
  maxCount: number;
  cpuTargetPercent: number;
  connectionsPerTask: number;
}

/**
 * Scale-in waits long: a task that stops sends its agents elsewhere, which costs every one of
 * them a TLS handshake, so the fleet shrinks only when load has stayed low.
 */
const SCALE_IN_COOLDOWN = Duration.minutes(10);
const SCALE_OUT_COOLDOWN = Duration.minutes(2);

/**
 * A target-tracking metric takes at most 10 metric queries: one per zone, the healthy tasks and
 * the expression leave room for 8 zones, more than any region has.
 */
const MAX_ZONES = 8;

/**
 * Two target-tracking policies; the service scales out when either asks and in only when both
 * allow.
 *
 * - CPU: TLS handshakes (agents reconnecting, new tunnels) and data are what burn CPU.
 * - Connections per task: an idle agent costs memory and no CPU (issue 15: ~85-100 KiB each),
 *   so a fleet holding many quiet agents needs more tasks before CPU says so. The metric is the
 *   NLB's concurrent flows (ActiveFlowCount, both listeners) divided by the gateway target
 *   group's HealthyHostCount, in metric math, which CDK's L2 target tracking does not render:
 *   the policy is an L1 CfnScalingPolicy.
 *
 * Which statistic (Elastic Load Balancing guide, "Statistics for Network Load Balancer
 * metrics"): every load balancer node reports its own data points, one node per enabled
 * Availability Zone. On the LoadBalancer dimension alone, Average is the mean of the nodes'
 * reports, so with two zones it is half the flows (the policy scaled at twice the target per
 * task); Sum adds every report in the period, which counts a node twice whenever it reports twice
 * in one window, and the guide lists Average, Minimum and Maximum, not Sum, as the useful
 * statistics of ActiveFlowCount. So: Average per zone (that zone's node, however often it
 * reports), added up over the zones. HealthyHostCount is Minimum: each node counts every target
 * (cross-zone is on), and the least count is the safe divisor.
 */
export class GatewayScaling extends Construct {
  readonly scalableTarget: ecs.ScalableTaskCount;
  readonly connectionsPolicy: appscaling.CfnScalingPolicy;

  constructor(scope: Construct, id: string, props: GatewayScalingProps) {
    super(scope, id);
    this.scalableTarget = props.service.autoScaleTaskCount({
      minCapacity: props.minCount,
      maxCapacity: props.maxCount,
    });
    this.scalableTarget.scaleOnCpuUtilization("Cpu", {
      targetUtilizationPercent: props.cpuTargetPercent,
      scaleInCooldown: SCALE_IN_COOLDOWN,
      scaleOutCooldown: SCALE_OUT_COOLDOWN,
    });

    const lbDimension = props.loadBalancer.loadBalancerFullName;
    if (props.availabilityZones.length === 0 || props.availabilityZones.length > MAX_ZONES) {
      throw new RangeError(
        `connections-per-task scaling: 1 to ${MAX_ZONES} load balancer zones, not ${props.availabilityZones.length}`,
      );
    }
    const zoneIds = props.availabilityZones.map((_, i) => `flows${i}`);
    this.connectionsPolicy = new appscaling.CfnScalingPolicy(this, "Connections", {
      policyName: `${props.service.node.path.replace(/\//g, "-")}-connections-per-task`.slice(-256),
      policyType: "TargetTrackingScaling",
      // ScalableTaskCount keeps its ScalableTarget as the child "Target" (aws-cdk-lib).
      scalingTargetId: (this.scalableTarget.node.findChild("Target") as appscaling.ScalableTarget)
        .scalableTargetId,
      targetTrackingScalingPolicyConfiguration: {
        targetValue: props.connectionsPerTask,
        scaleInCooldown: SCALE_IN_COOLDOWN.toSeconds(),
        scaleOutCooldown: SCALE_OUT_COOLDOWN.toSeconds(),
        customizedMetricSpecification: {
          metrics: [
            ...props.availabilityZones.map((zone, i) => ({
              id: zoneIds[i]!,
              returnData: false,
              metricStat: {
                metric: {
                  namespace: "AWS/NetworkELB",
                  metricName: "ActiveFlowCount",
                  dimensions: [
                    { name: "LoadBalancer", value: lbDimension },
                    { name: "AvailabilityZone", value: zone },
                  ],
                },
                stat: "Average",
              },
            })),
            {
              id: "tasks",
              returnData: false,
              metricStat: {
                metric: {
                  namespace: "AWS/NetworkELB",
                  metricName: "HealthyHostCount",
                  dimensions: [
                    { name: "LoadBalancer", value: lbDimension },
                    { name: "TargetGroup", value: props.gatewayTargetGroup.targetGroupFullName },
                  ],
                },
                stat: "Minimum",
              },
            },
            {
              id: "flowsPerTask",
              expression: `(${zoneIds.join(" + ")}) / tasks`,
              label: "NLB flows per healthy task",
              returnData: true,
            },
          ],
        },
      },
    });
  }
}
