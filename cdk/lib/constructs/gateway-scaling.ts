import { Duration } from "aws-cdk-lib";
import * as appscaling from "aws-cdk-lib/aws-applicationautoscaling";
import type * as ecs from "aws-cdk-lib/aws-ecs";
import type * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import { Construct } from "constructs";

export interface GatewayScalingProps {
  service: ecs.FargateService;
  loadBalancer: elbv2.NetworkLoadBalancer;
  gatewayTargetGroup: elbv2.NetworkTargetGroup;
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
 * Two target-tracking policies; the service scales out when either asks and in only when both
 * allow.
 *
 * - CPU: TLS handshakes (agents reconnecting, new tunnels) and data are what burn CPU.
 * - Connections per task: an idle agent costs memory and no CPU (issue 15: ~85-100 KiB each),
 *   so a fleet holding many quiet agents needs more tasks before CPU says so. The NLB's
 *   ActiveFlowCount (all concurrent flows, both listeners) divided by the gateway target
 *   group's HealthyHostCount is the flows each task holds. The NLB publishes ActiveFlowCount
 *   per load balancer only, hence the metric math, which CDK's L2 target tracking does not
 *   render: the policy is an L1 CfnScalingPolicy.
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
            {
              id: "flows",
              returnData: false,
              metricStat: {
                metric: {
                  namespace: "AWS/NetworkELB",
                  metricName: "ActiveFlowCount",
                  dimensions: [{ name: "LoadBalancer", value: lbDimension }],
                },
                stat: "Average",
              },
            },
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
              expression: "flows / tasks",
              label: "NLB flows per healthy task",
              returnData: true,
            },
          ],
        },
      },
    });
  }
}
