import { App } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import { describe, expect, it } from "vitest";
import { buildKgwApp } from "../../cdk/lib/kgw-app.js";
import { REVIEWED_FINDINGS } from "../../cdk/lib/nag-suppressions.js";
import { APP_CONTEXT, testConfig } from "./fixtures.js";

/**
 * The pack runs as a validation plugin at synthesis (kgw-app.ts), where acknowledgements apply:
 * a synthesis that does not throw is one with no unacknowledged finding.
 */
const synth = (overrides: Record<string, unknown>, extra?: (app: App) => void) => {
  const app = new App({ context: APP_CONTEXT });
  const stacks = buildKgwApp(app, testConfig(overrides));
  extra?.(app);
  app.synth();
  return stacks;
};

describe("cdk-nag AwsSolutions", () => {
  it.each([
    ["a new VPC and a hosted zone", {}],
    [
      "a certificate ARN, the Dockerfile as an asset, a narrowed source range",
      {
        hostedZoneId: undefined,
        hostedZoneName: undefined,
        certificateArn: "arn:aws:acm:eu-west-1:123456789012:certificate/00000000-0000-0000-0000-000000000000",
        image: "asset",
        allowedCidrs: "198.51.100.0/24",
      },
    ],
    ["an existing VPC", { vpcId: "vpc-0123456789abcdef0" }],
  ])("passes with %s, every exception acknowledged with its reason", (_name, overrides) => {
    expect(() => synth(overrides)).not.toThrow();
  });

  it("fails the synthesis on a finding nobody acknowledged", () => {
    let service: ReturnType<typeof synth>["service"] | undefined;
    expect(() =>
      synth({}, (app) => {
        service = app.node.findChild("Kgw-Service") as ReturnType<typeof synth>["service"];
        const sg = new ec2.SecurityGroup(service, "Careless", { vpc: service.network.vpc });
        sg.addIngressRule(ec2.Peer.anyIpv4(), ec2.Port.tcp(22));
      }),
    ).toThrow(/AwsSolutions-EC23[\s\S]*Careless/);
  });

  it("gives every acknowledgement a reason an auditor can check", () => {
    for (const f of Object.values(REVIEWED_FINDINGS).flat()) {
      expect(f.reason.length, `${f.path} ${f.rule}`).toBeGreaterThan(80);
      expect(f.rule).toMatch(/^AwsSolutions-[A-Z]+\d+(\[.+\])?$/);
    }
  });
});
