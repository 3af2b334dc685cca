/**
 * Every cdk-nag (AwsSolutions) finding this deployment does not pass, each acknowledged on the one
 * construct it concerns, with the reason. Anything not listed here fails `cdk synth` and the
 * tests (test/cdk/nag.test.ts), so a new finding is a decision someone has to write down.
 */
import { type Stack, Validations } from "aws-cdk-lib";
import type { IConstruct } from "constructs";

export interface ReviewedFinding {
  /** Construct path below the stack, e.g. "Secrets/GatewayCa". */
  path: string;
  /** cdk-nag's rule id, with its finding for granular rules (IAM5[Resource::*]). */
  rule: string;
  reason: string;
}

const SECRET_ROTATION =
  "Holds an X.509 certificate and private key, not a password: rotating it means issuing a new certificate from a CA, which a Secrets Manager rotation function cannot do. Rotation is the procedure in docs/DEPLOY.md (kgw pki, put-secret-value, a rolling deployment).";

export const REVIEWED_FINDINGS: Readonly<Record<"stateful" | "service", readonly ReviewedFinding[]>> = {
  stateful: ["GatewayCa", "GatewayTls", "PeerCa", "PeerTls"].map((name) => ({
    path: `Secrets/${name}`,
    rule: "AwsSolutions-SMG4",
    reason: SECRET_ROTATION,
  })),
  service: [
    {
      path: "Network/LoadBalancerSecurityGroup",
      rule: "AwsSolutions-EC23",
      reason:
        "The gateway is a public endpoint by design: tenants' agents and kube-apiservers connect from wherever their clusters run (8132, mutual TLS or tokens checked by the gateway) and kubectl fetches install manifests (443). Only those two ports are open; kgw:allowedCidrs narrows the sources.",
    },
    {
      path: "Gateway/Task",
      rule: "AwsSolutions-ECS2",
      reason:
        "The plain environment holds no secret: AWS_REGION, NODE_OPTIONS (the heap size) and the log router's log group names. Every certificate and key comes from Secrets Manager through the container's secrets.",
    },
    {
      path: "Gateway/Task/ExecutionRole/DefaultPolicy",
      rule: "AwsSolutions-IAM5[Resource::*]",
      reason:
        "ecr:GetAuthorizationToken supports no resource-level permission and must be granted on *; the image pull actions themselves are scoped to the image's repository by CDK.",
    },
    {
      path: "LoadBalancer/Nlb",
      rule: "AwsSolutions-ELB2",
      reason:
        "NLB access logs record TLS listeners only, so the 8132 TCP listener, which carries every agent and tunnel, would log nothing. Each dial is recorded by the gateway's audit log (its own log group, retained), and install requests (443) are logged by the gateway.",
    },
  ],
};

export function suppressReviewedFindings(stack: Stack, which: keyof typeof REVIEWED_FINDINGS): void {
  for (const finding of REVIEWED_FINDINGS[which]) {
    const target: IConstruct | undefined = stack.node.tryFindChild(finding.path.split("/")[0]!)
      ? findPath(stack, finding.path)
      : undefined;
    if (!target) throw new Error(`nag suppression: ${stack.node.path}/${finding.path} does not exist`);
    Validations.of(target).acknowledge({ id: `AwsSolutions::${finding.rule}`, reason: finding.reason });
  }
}

function findPath(root: IConstruct, path: string): IConstruct | undefined {
  let node: IConstruct | undefined = root;
  for (const part of path.split("/")) node = node?.node.tryFindChild(part);
  return node;
}
