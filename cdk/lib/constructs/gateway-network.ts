import { RemovalPolicy } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as logs from "aws-cdk-lib/aws-logs";
import { Construct } from "constructs";
import { retentionDays } from "../log-retention.js";
import { GATEWAY_PORTS, INSTALL_LISTENER_PORT } from "../ports.js";

/** The address range of a VPC the app creates (CDK's default, stated). */
export const NEW_VPC_CIDR = "10.0.0.0/16";

export interface GatewayNetworkProps {
  /** An existing VPC, looked up by id (needs the stack's account and region); null: a new one. */
  vpcId: string | null;
  natGateways: number;
  /** Who may reach the load balancer's listeners. */
  allowedCidrs: readonly string[];
  logRetentionDays: number;
}

/**
 * The VPC and the two security groups, which are the gateway's firewall:
 *
 *   load balancer SG  in:  8132 and 443 from allowedCidrs
 *                     out: 8132, 8443 and 8134 (health checks) to the tasks only
 *   task SG           in:  8132, 8443, 8134 from the load balancer SG
 *                          8135 (peer) from this same SG: the service's own tasks
 *                          8133 (admin: /metrics) from the VPC's CIDR
 *                     out: 443 (AWS APIs through NAT or endpoints), 8135 to this same SG
 *
 * The tasks reference the load balancer's SG rather than client addresses, which holds with
 * client IP preservation on (the tasks see real client addresses, the SG still matches).
 */
export class GatewayNetwork extends Construct {
  readonly vpc: ec2.IVpc;
  readonly loadBalancerSecurityGroup: ec2.SecurityGroup;
  readonly taskSecurityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: GatewayNetworkProps) {
    super(scope, id);
    this.vpc = props.vpcId ? ec2.Vpc.fromLookup(this, "Vpc", { vpcId: props.vpcId }) : this.newVpc(props);

    this.loadBalancerSecurityGroup = new ec2.SecurityGroup(this, "LoadBalancerSecurityGroup", {
      vpc: this.vpc,
      description: "kgw NLB: 8132 and 443 from clients; to the gateway tasks only",
      allowAllOutbound: false,
    });
    for (const cidr of props.allowedCidrs) {
      for (const port of [GATEWAY_PORTS.gateway, INSTALL_LISTENER_PORT]) {
        this.loadBalancerSecurityGroup.addIngressRule(
          ec2.Peer.ipv4(cidr),
          ec2.Port.tcp(port),
          `clients to ${port}`,
        );
      }
    }

    this.taskSecurityGroup = new ec2.SecurityGroup(this, "TaskSecurityGroup", {
      vpc: this.vpc,
      description: "kgw gateway tasks",
      allowAllOutbound: false,
    });
    const fromNlb: [number, string][] = [
      [GATEWAY_PORTS.gateway, "agents and callers through the NLB"],
      [GATEWAY_PORTS.install, "install route through the NLB"],
      [GATEWAY_PORTS.health, "NLB health checks"],
    ];
    for (const [port, why] of fromNlb) {
      this.taskSecurityGroup.connections.allowFrom(this.loadBalancerSecurityGroup, ec2.Port.tcp(port), why);
    }
    this.taskSecurityGroup.connections.allowInternally(
      ec2.Port.tcp(GATEWAY_PORTS.peer),
      "peer links between tasks",
    );
    // A CIDR the template states (not the VPC's GetAtt), so a reader and cdk-nag see what it is.
    const vpcCidr = props.vpcId ? this.vpc.vpcCidrBlock : NEW_VPC_CIDR;
    this.taskSecurityGroup.addIngressRule(
      ec2.Peer.ipv4(vpcCidr),
      ec2.Port.tcp(GATEWAY_PORTS.admin),
      "admin (/metrics) from inside the VPC",
    );
    this.taskSecurityGroup.addEgressRule(
      ec2.Peer.anyIpv4(),
      ec2.Port.tcp(443),
      "AWS APIs: DynamoDB, Secrets Manager, ECR, CloudWatch Logs",
    );
  }

  private newVpc(props: GatewayNetworkProps): ec2.Vpc {
    const vpc = new ec2.Vpc(this, "Vpc", {
      ipAddresses: ec2.IpAddresses.cidr(NEW_VPC_CIDR),
      maxAzs: 2,
      natGateways: props.natGateways,
      subnetConfiguration: [
        { name: "public", subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: "tasks", subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 22 },
      ],
      // Free, and they keep the registry's and the image layers' traffic off the NAT gateways:
      // no per-GB NAT charge, and DynamoDB stays reachable if a NAT gateway's AZ fails.
      gatewayEndpoints: {
        DynamoDb: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB },
        S3: { service: ec2.GatewayVpcEndpointAwsService.S3 },
      },
    });
    // Rejected traffic only: what the security groups refuse is what is worth reading, and
    // accepted traffic would log every tunnel's packets at CloudWatch ingestion prices.
    const flowLogGroup = new logs.LogGroup(this, "FlowLog", {
      retention: retentionDays(props.logRetentionDays),
      removalPolicy: RemovalPolicy.DESTROY,
    });
    vpc.addFlowLog("RejectedTraffic", {
      destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup),
      trafficType: ec2.FlowLogTrafficType.REJECT,
    });
    return vpc;
  }
}
