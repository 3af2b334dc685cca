import { Duration } from "aws-cdk-lib";
import * as acm from "aws-cdk-lib/aws-certificatemanager";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import type * as ecs from "aws-cdk-lib/aws-ecs";
import * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import * as route53 from "aws-cdk-lib/aws-route53";
import * as route53targets from "aws-cdk-lib/aws-route53-targets";
import { Construct } from "constructs";
import type { InstallCertificateSource } from "../deploy-config.js";
import { GATEWAY_PORTS, HEALTH_CHECK_PATH, INSTALL_LISTENER_PORT } from "../ports.js";
import type { LifecycleTimings } from "../timing.js";

export interface GatewayLoadBalancerProps {
  vpc: ec2.IVpc;
  securityGroup: ec2.ISecurityGroup;
  service: ecs.FargateService;
  containerName: string;
  domainName: string;
  certificate: InstallCertificateSource;
  timings: LifecycleTimings;
  tcpIdleTimeoutSeconds: number;
}

/**
 * The health check of both target groups: GET /healthz on the health port. Not /readyz: the
 * target group's verdict also decides whether ECS replaces the task, and /readyz follows the
 * registry lease, so a DynamoDB outage would have ECS kill every task and drop every live
 * tunnel, the one thing the fleet promises not to do while DynamoDB is away. /healthz answers
 * while the process runs and listens, with agents or without, which is what "may receive
 * connections" means here. A stopping task needs no failing check: ECS deregisters it before
 * SIGTERM.
 */
export const HEALTH_CHECK = {
  protocol: elbv2.Protocol.HTTP,
  port: String(GATEWAY_PORTS.health),
  path: HEALTH_CHECK_PATH,
  interval: Duration.seconds(10),
  timeout: Duration.seconds(5),
  healthyThresholdCount: 2,
  unhealthyThresholdCount: 2,
} as const;

/**
 * The Network Load Balancer:
 *
 *   TCP 8132 -> task 8132   agents, kube-apiservers (CONNECT) and gRPC callers; TLS and client
 *                           certificates are the gateway's, so the NLB passes bytes through,
 *                           with client IP preservation so per-source limits see real clients
 *   TLS 443  -> task 8443   the install URL, with an ACM certificate kubectl trusts; the NLB
 *                           re-encrypts to the task (TLS target group), so nothing is plaintext
 *
 * Cross-zone load balancing is on: with two tasks, an AZ whose only task is being replaced
 * would otherwise answer from an NLB node with no target until DNS moves clients away.
 */
export class GatewayLoadBalancer extends Construct {
  readonly loadBalancer: elbv2.NetworkLoadBalancer;
  readonly gatewayTargetGroup: elbv2.NetworkTargetGroup;
  readonly installTargetGroup: elbv2.NetworkTargetGroup;
  readonly certificate: acm.ICertificate;
  /** Where the load balancer has its nodes: one per zone of its subnets. */
  readonly availabilityZones: string[];

  constructor(scope: Construct, id: string, props: GatewayLoadBalancerProps) {
    super(scope, id);
    const vpcSubnets = { subnetType: ec2.SubnetType.PUBLIC };
    this.loadBalancer = new elbv2.NetworkLoadBalancer(this, "Nlb", {
      vpc: props.vpc,
      internetFacing: true,
      crossZoneEnabled: true,
      securityGroups: [props.securityGroup],
      vpcSubnets,
    });
    // Once each: a zone with two public subnets still has one node (the NLB takes one subnet a zone).
    this.availabilityZones = [...new Set(props.vpc.selectSubnets(vpcSubnets).availabilityZones)];

    let zone: route53.IHostedZone | undefined;
    if (props.certificate.kind === "hosted-zone") {
      zone = route53.HostedZone.fromHostedZoneAttributes(this, "Zone", {
        hostedZoneId: props.certificate.zoneId,
        zoneName: props.certificate.zoneName,
      });
      this.certificate = new acm.Certificate(this, "InstallCertificate", {
        domainName: props.domainName,
        validation: acm.CertificateValidation.fromDns(zone),
      });
      new route53.ARecord(this, "Alias", {
        zone,
        recordName: props.domainName,
        target: route53.RecordTarget.fromAlias(new route53targets.LoadBalancerTarget(this.loadBalancer)),
      });
    } else {
      this.certificate = acm.Certificate.fromCertificateArn(
        this,
        "InstallCertificate",
        props.certificate.certificateArn,
      );
    }

    const targetGroupDefaults = {
      vpc: props.vpc,
      targetType: elbv2.TargetType.IP,
      preserveClientIp: true,
      deregistrationDelay: Duration.seconds(props.timings.deregistrationDelaySeconds),
      // Flows open when ECS deregisters a task must live on into the gateway's own drain.
      connectionTermination: false,
      healthCheck: HEALTH_CHECK,
    };

    const gatewayListener = this.loadBalancer.addListener("Gateway", {
      port: GATEWAY_PORTS.gateway,
      protocol: elbv2.Protocol.TCP,
      tcpIdleTimeout: Duration.seconds(props.tcpIdleTimeoutSeconds),
    });
    this.gatewayTargetGroup = new elbv2.NetworkTargetGroup(this, "GatewayTargets", {
      ...targetGroupDefaults,
      port: GATEWAY_PORTS.gateway,
      protocol: elbv2.Protocol.TCP,
      targets: [
        props.service.loadBalancerTarget({
          containerName: props.containerName,
          containerPort: GATEWAY_PORTS.gateway,
        }),
      ],
    });
    gatewayListener.addTargetGroups("Gateway", this.gatewayTargetGroup);

    const installListener = this.loadBalancer.addListener("Install", {
      port: INSTALL_LISTENER_PORT,
      protocol: elbv2.Protocol.TLS,
      certificates: [elbv2.ListenerCertificate.fromCertificateManager(this.certificate)],
      sslPolicy: elbv2.SslPolicy.RECOMMENDED_TLS,
    });
    this.installTargetGroup = new elbv2.NetworkTargetGroup(this, "InstallTargets", {
      ...targetGroupDefaults,
      port: GATEWAY_PORTS.install,
      protocol: elbv2.Protocol.TLS,
      targets: [
        props.service.loadBalancerTarget({
          containerName: props.containerName,
          containerPort: GATEWAY_PORTS.install,
        }),
      ],
    });
    installListener.addTargetGroups("Install", this.installTargetGroup);
  }
}
