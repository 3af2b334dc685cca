import { Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { synthStacks } from "./fixtures.js";

type MetricQuery = {
  Id: string;
  Expression?: string;
  ReturnData?: boolean;
  MetricStat?: {
    Stat: string;
    Metric: { Namespace: string; MetricName: string; Dimensions: { Name: string; Value: unknown }[] };
  };
};

/** The connections-per-task policy's metric queries, as the template gives them. */
function connectionQueries(overrides: Record<string, unknown> = {}): MetricQuery[] {
  const template = Template.fromStack(synthStacks(overrides).service);
  const policies = Object.values(template.findResources("AWS::ApplicationAutoScaling::ScalingPolicy"));
  const custom = policies
    .map((p) => p.Properties.TargetTrackingScalingPolicyConfiguration)
    .find((c) => c.CustomizedMetricSpecification);
  expect(custom.TargetValue).toBe(5000);
  return custom.CustomizedMetricSpecification.Metrics as MetricQuery[];
}

describe("scaling on NLB flows per healthy task", () => {
  const queries = connectionQueries();
  const flows = queries.filter((q) => q.MetricStat?.Metric.MetricName === "ActiveFlowCount");

  it("reads ActiveFlowCount per Availability Zone with Average: each zone's node, not a mean of the nodes", () => {
    // The fixture's VPC spans two zones, so the NLB has two nodes.
    expect(flows).toHaveLength(2);
    for (const q of flows) {
      expect(q.MetricStat!.Stat).toBe("Average");
      expect(q.MetricStat!.Metric.Namespace).toBe("AWS/NetworkELB");
      expect(q.MetricStat!.Metric.Dimensions.map((d) => d.Name).sort()).toEqual([
        "AvailabilityZone",
        "LoadBalancer",
      ]);
      expect(q.ReturnData).toBe(false);
    }
    const zones = flows.map(
      (q) => q.MetricStat!.Metric.Dimensions.find((d) => d.Name === "AvailabilityZone")!.Value,
    );
    expect(new Set(zones.map((z) => JSON.stringify(z))).size).toBe(2);
  });

  it("adds the zones' flows and divides by the least healthy-task count any node reports", () => {
    const tasks = queries.find((q) => q.MetricStat?.Metric.MetricName === "HealthyHostCount")!;
    expect(tasks.MetricStat!.Stat).toBe("Minimum");
    expect(tasks.MetricStat!.Metric.Dimensions.map((d) => d.Name).sort()).toEqual([
      "LoadBalancer",
      "TargetGroup",
    ]);
    const out = queries.filter((q) => q.ReturnData !== false);
    expect(out).toHaveLength(1);
    expect(out[0]!.Expression).toBe(`(${flows.map((q) => q.Id).join(" + ")}) / ${tasks.Id}`);
  });

  it("takes the zones of the load balancer's own subnets, whatever the VPC", () => {
    for (const overrides of [{}, { vpcId: "vpc-0123456789abcdef0" }]) {
      const { service } = synthStacks(overrides);
      const zones = connectionQueries(overrides)
        .filter((q) => q.MetricStat?.Metric.MetricName === "ActiveFlowCount")
        .map((q) => q.MetricStat!.Metric.Dimensions.find((d) => d.Name === "AvailabilityZone")!.Value);
      expect(zones).toEqual(service.resolve(service.loadBalancer.availabilityZones));
    }
  });
});
