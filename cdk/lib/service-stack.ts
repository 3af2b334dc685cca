import { CfnOutput, RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import * as ecs from "aws-cdk-lib/aws-ecs";
import * as logs from "aws-cdk-lib/aws-logs";
import type { Construct } from "constructs";
import { GatewayAlarms } from "./constructs/gateway-alarms.js";
import { GatewayDashboard } from "./constructs/gateway-dashboard.js";
import { GatewayLoadBalancer } from "./constructs/gateway-load-balancer.js";
import { GatewayNetwork } from "./constructs/gateway-network.js";
import { GatewayScaling } from "./constructs/gateway-scaling.js";
import { GatewayService } from "./constructs/gateway-service.js";
import type { DeployConfig } from "./deploy-config.js";
import { retentionDays } from "./log-retention.js";
import { GATEWAY_PORTS, INSTALL_LISTENER_PORT } from "./ports.js";
import type { StatefulStack } from "./stateful-stack.js";
import { lifecycleTimings, tcpIdleTimeoutSeconds } from "./timing.js";

/**
 * The metrics documents are read once, by CloudWatch as they arrive; a week of them is for
 * finding out why a metric looks wrong, not a history (the metrics keep theirs, 15 months).
 */
const METRICS_LOG_RETENTION = logs.RetentionDays.ONE_WEEK;

export interface ServiceStackProps extends StackProps {
  config: DeployConfig;
  stateful: StatefulStack;
}

/**
 * The gateway fleet: network, ECS cluster, Fargate service, load balancer, scaling and alarms.
 * Holds nothing that cannot be rebuilt: its state is in the stateful stack.
 */
export class ServiceStack extends Stack {
  readonly network: GatewayNetwork;
  readonly gateway: GatewayService;
  readonly loadBalancer: GatewayLoadBalancer;
  readonly scaling: GatewayScaling;
  readonly alarms: GatewayAlarms;
  readonly opsLogGroup: logs.LogGroup;
  readonly metricsLogGroup: logs.LogGroup;
  readonly dashboard: GatewayDashboard;

  constructor(scope: Construct, id: string, props: ServiceStackProps) {
    super(scope, id, props);
    const { config, stateful } = props;
    const timings = lifecycleTimings(config.gracefulShutdownSeconds);

    this.network = new GatewayNetwork(this, "Network", {
      vpcId: config.vpcId,
      natGateways: config.natGateways,
      allowedCidrs: config.allowedCidrs,
      logRetentionDays: config.logRetentionDays,
    });
    const cluster = new ecs.Cluster(this, "Cluster", {
      vpc: this.network.vpc,
      containerInsightsV2: ecs.ContainerInsights.ENABLED,
    });
    this.opsLogGroup = new logs.LogGroup(this, "OpsLog", {
      retention: retentionDays(config.logRetentionDays),
      removalPolicy: RemovalPolicy.DESTROY,
    });
    // The tasks' metrics documents; CloudWatch has extracted the metrics by the time they land.
    this.metricsLogGroup = new logs.LogGroup(this, "MetricsLog", {
      retention: METRICS_LOG_RETENTION,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.gateway = new GatewayService(this, "Gateway", {
      cluster,
      taskSecurityGroup: this.network.taskSecurityGroup,
      registry: stateful.registry,
      secrets: { gatewayTls: stateful.secrets.gatewayTls, peerTls: stateful.secrets.peerTls },
      opsLogGroup: this.opsLogGroup,
      auditLogGroup: stateful.auditLogGroup,
      metricsLogGroup: this.metricsLogGroup,
      image: config.image,
      domainName: config.domainName,
      agentImage: config.agentImage,
      desiredCount: config.desiredCount,
      taskCpu: config.taskCpu,
      taskMemoryMiB: config.taskMemoryMiB,
      timings,
    });

    this.loadBalancer = new GatewayLoadBalancer(this, "LoadBalancer", {
      vpc: this.network.vpc,
      securityGroup: this.network.loadBalancerSecurityGroup,
      service: this.gateway.service,
      containerName: this.gateway.container.containerName,
      domainName: config.domainName,
      certificate: config.certificate,
      timings,
      tcpIdleTimeoutSeconds: tcpIdleTimeoutSeconds(),
    });

    this.scaling = new GatewayScaling(this, "Scaling", {
      service: this.gateway.service,
      loadBalancer: this.loadBalancer.loadBalancer,
      gatewayTargetGroup: this.loadBalancer.gatewayTargetGroup,
      availabilityZones: this.loadBalancer.availabilityZones,
      minCount: config.desiredCount,
      maxCount: config.maxCount,
      cpuTargetPercent: config.cpuTargetPercent,
      connectionsPerTask: config.connectionsPerTask,
    });

    this.alarms = new GatewayAlarms(this, "Alarms", {
      fleet: stateful.table.tableName,
      metricsLogGroup: this.metricsLogGroup,
      loadBalancer: this.loadBalancer.loadBalancer,
      targetGroups: {
        Gateway: this.loadBalancer.gatewayTargetGroup,
        Install: this.loadBalancer.installTargetGroup,
      },
      table: stateful.table,
      minHealthyTasks: config.desiredCount,
      alarmTopicArn: config.alarmTopicArn,
    });
    this.dashboard = new GatewayDashboard(this, "Dashboard", {
      fleet: stateful.table.tableName,
      loadBalancer: this.loadBalancer.loadBalancer,
      gatewayTargetGroup: this.loadBalancer.gatewayTargetGroup,
      alarms: this.alarms.alarms,
    });

    new CfnOutput(this, "GatewayAddress", {
      value: `${config.domainName}:${GATEWAY_PORTS.gateway}`,
      description: "what agents and kube-apiservers dial (kgw tenant --gateway-address)",
    });
    new CfnOutput(this, "InstallAddress", {
      value: `${config.domainName}:${INSTALL_LISTENER_PORT}`,
      description: "kgw tenant install-token --gateway-address: the install link's host",
    });
    new CfnOutput(this, "LoadBalancerDnsName", {
      value: this.loadBalancer.loadBalancer.loadBalancerDnsName,
      description: "point the domain here (a CNAME or alias) when the stack does not manage DNS",
    });
    new CfnOutput(this, "OpsLogGroupName", { value: this.opsLogGroup.logGroupName });
    // For `aws ecs update-service --cluster … --service …` (docs/DEPLOY.md, certificate rotation).
    new CfnOutput(this, "ClusterName", { value: cluster.clusterName });
    new CfnOutput(this, "ServiceName", { value: this.gateway.service.serviceName });
  }
}
