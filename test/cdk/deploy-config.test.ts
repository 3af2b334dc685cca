import { describe, expect, it } from "vitest";
import { DeployConfigError, MIN_TASKS, readDeployConfig } from "../../cdk/lib/deploy-config.js";
import { testConfig, testContext } from "./fixtures.js";

const read = (ctx: Record<string, unknown>, env: Record<string, string> = {}) =>
  readDeployConfig((key) => ctx[key.replace(/^kgw:/, "")], env);

describe("the CDK app's context", () => {
  it("has defaults an operator would expect: two tasks, 1 vCPU / 2 GiB, the Dockerfile, the server's grace", () => {
    const c = read({ domainName: "gw.example.com", certificateArn: ARN });
    expect(c).toMatchObject({
      desiredCount: MIN_TASKS,
      maxCount: 10,
      taskCpu: 1024,
      taskMemoryMiB: 2048,
      image: { kind: "asset" },
      gracefulShutdownSeconds: 20,
      vpcId: null,
      natGateways: 2,
      allowedCidrs: ["0.0.0.0/0"],
      account: undefined,
      region: undefined,
      certificate: { kind: "certificate", certificateArn: ARN },
    });
  });

  it("takes strings from -c and JSON values from cdk.json alike", () => {
    expect(testConfig({ desiredCount: "3", maxCount: 12 })).toMatchObject({ desiredCount: 3, maxCount: 12 });
    expect(testConfig({ allowedCidrs: "10.0.0.0/8, 192.0.2.0/24" }).allowedCidrs).toEqual([
      "10.0.0.0/8",
      "192.0.2.0/24",
    ]);
    expect(testConfig({ allowedCidrs: ["203.0.113.0/24"] }).allowedCidrs).toEqual(["203.0.113.0/24"]);
  });

  it("falls back to the CLI's account and region", () => {
    const c = read(
      { domainName: "gw.example.com", certificateArn: ARN },
      { CDK_DEFAULT_ACCOUNT: "210987654321", CDK_DEFAULT_REGION: "us-east-2" },
    );
    expect(c).toMatchObject({ account: "210987654321", region: "us-east-2" });
  });

  it.each([
    [{ domainName: undefined }, /domainName is required/],
    [{ domainName: "Gateway.Example.com" }, /lower-case DNS name/],
    [{ hostedZoneId: undefined }, /needs a certificate/],
    [{ certificateArn: ARN }, /not both/],
    [{ domainName: "gw.other.org" }, /not in the hosted zone/],
    [{ desiredCount: 1 }, /desiredCount: expected an integer from 2/],
    [{ desiredCount: 4, maxCount: 3 }, /maxCount: expected an integer from 4/],
    [{ taskCpu: 1000 }, /not a Fargate size/],
    [{ taskCpu: 256, taskMemoryMiB: 4096 }, /512-2048 MiB/],
    [{ image: "kgw" }, /image: give a tag or a digest/],
    [{ agentImage: "not an image" }, /agentImage/],
    [{ gracefulShutdownSeconds: 111 }, /does not fit in Fargate's stop timeout/],
    [{ logRetentionDays: 31 }, /logRetentionDays: CloudWatch Logs keeps/],
    [{ allowedCidrs: "10.0.0.0" }, /not an IPv4 CIDR/],
    [{ alarmTopicArn: "arn:aws:sqs:eu-west-1:123456789012:q" }, /not an SNS topic ARN/],
    [{ vpcId: "vpc-0123456789abcdef0", account: undefined }, /vpcId needs kgw:account/],
    [{ account: "12345" }, /12-digit/],
  ])("refuses %o", (overrides, message) => {
    expect(() => testConfig(overrides)).toThrow(DeployConfigError);
    expect(() => testConfig(overrides)).toThrow(message);
  });

  it("reads the hosted zone with or without its trailing dot", () => {
    expect(testConfig({ hostedZoneName: "example.com." }).certificate).toEqual({
      kind: "hosted-zone",
      zoneId: testContext().hostedZoneId,
      zoneName: "example.com",
    });
  });
});

const ARN = "arn:aws:acm:eu-west-1:123456789012:certificate/00000000-0000-0000-0000-000000000000";
