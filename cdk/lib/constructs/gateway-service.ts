import * as path from "node:path";
import { fileURLToPath } from "node:url";
import { Duration, Stack } from "aws-cdk-lib";
import type * as ec2 from "aws-cdk-lib/aws-ec2";
import * as ecs from "aws-cdk-lib/aws-ecs";
import type * as logs from "aws-cdk-lib/aws-logs";
import type * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";
import type { GatewayImageSource } from "../deploy-config.js";
import { CONTAINER_HEALTH_CHECK, gatewayCommand, PEM_ENV, PEM_ENV_SOURCES } from "../gateway-command.js";
import { GATEWAY_PORTS } from "../ports.js";
import type { LifecycleTimings } from "../timing.js";
import type { RegistryTable } from "./registry-table.js";

/** The repository root: the gateway image's build context (Dockerfile, .dockerignore). */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
const LOG_ROUTER_DIR = path.resolve(REPO_ROOT, "cdk/log-router");

/** UID the image runs as (Dockerfile; the agent manifest assumes the same). */
export const GATEWAY_UID = "65532";

/**
 * Memory kept for the log router. Fluent Bit with two CloudWatch outputs runs in about 30 MiB;
 * 64 MiB is a reservation, not a limit, so a burst borrows from the task.
 */
const LOG_ROUTER_MEMORY_MIB = 64;

/** V8's old space as a share of the gateway's memory: the rest is buffers, stacks and code. */
const HEAP_SHARE = 0.75;

export interface GatewayServiceProps {
  cluster: ecs.ICluster;
  taskSecurityGroup: ec2.ISecurityGroup;
  registry: RegistryTable;
  secrets: { gatewayTls: secretsmanager.ISecret; peerTls: secretsmanager.ISecret };
  opsLogGroup: logs.ILogGroup;
  auditLogGroup: logs.ILogGroup;
  /** Where the gateway's metrics documents go; CloudWatch extracts the metrics there. */
  metricsLogGroup: logs.ILogGroup;
  image: GatewayImageSource;
  domainName: string;
  agentImage: string;
  desiredCount: number;
  taskCpu: number;
  taskMemoryMiB: number;
  timings: LifecycleTimings;
}

/**
 * The Fargate service: a task of two containers, the gateway and its FireLens log router.
 *
 * Deployments are rolling with minHealthyPercent 100: a new task is started and healthy before
 * an old one is stopped, and an old one stops by the drain described in cdk/lib/timing.ts. The
 * circuit breaker rolls a deployment back when its tasks fail to become healthy (a wrong secret,
 * an image that does not start).
 */
export class GatewayService extends Construct {
  readonly service: ecs.FargateService;
  readonly taskDefinition: ecs.FargateTaskDefinition;
  readonly container: ecs.ContainerDefinition;

  constructor(scope: Construct, id: string, props: GatewayServiceProps) {
    super(scope, id);
    this.taskDefinition = new ecs.FargateTaskDefinition(this, "Task", {
      cpu: props.taskCpu,
      memoryLimitMiB: props.taskMemoryMiB,
      runtimePlatform: {
        cpuArchitecture: ecs.CpuArchitecture.X86_64,
        operatingSystemFamily: ecs.OperatingSystemFamily.LINUX,
      },
    });

    const logRouter = this.taskDefinition.addFirelensLogRouter("log-router", {
      image: ecs.ContainerImage.fromAsset(LOG_ROUTER_DIR),
      essential: true,
      memoryReservationMiB: LOG_ROUTER_MEMORY_MIB,
      firelensConfig: {
        type: ecs.FirelensLogRouterType.FLUENTBIT,
        options: {
          configFileType: ecs.FirelensConfigFileType.FILE,
          configFileValue: "/fluent-bit/etc/kgw.conf",
          // The audit record and pino's lines carry what they need (instance, time); ECS
          // metadata on every record would double the audit log's size.
          enableECSLogMetadata: false,
        },
      },
      environment: {
        AWS_REGION: Stack.of(this).region,
        KGW_OPS_LOG_GROUP: props.opsLogGroup.logGroupName,
        KGW_AUDIT_LOG_GROUP: props.auditLogGroup.logGroupName,
        KGW_METRICS_LOG_GROUP: props.metricsLogGroup.logGroupName,
      },
      // The router's own complaints go where an operator looks first.
      logging: ecs.LogDrivers.awsLogs({ logGroup: props.opsLogGroup, streamPrefix: "log-router" }),
    });

    const gatewayMemoryMiB = props.taskMemoryMiB - LOG_ROUTER_MEMORY_MIB;
    const secrets: Record<string, ecs.Secret> = {};
    for (const [name, source] of Object.entries(PEM_ENV_SOURCES)) {
      secrets[PEM_ENV[name as keyof typeof PEM_ENV]] = ecs.Secret.fromSecretsManager(
        props.secrets[source.secret],
        source.key,
      );
    }
    this.container = this.taskDefinition.addContainer("gateway", {
      image:
        props.image.kind === "asset"
          ? ecs.ContainerImage.fromAsset(REPO_ROOT, { file: "Dockerfile" })
          : ecs.ContainerImage.fromRegistry(props.image.reference),
      entryPoint: ["kgw"],
      command: gatewayCommand({
        tableName: props.registry.table.tableName,
        domainName: props.domainName,
        gracefulShutdownSeconds: props.timings.gracefulShutdownSeconds,
        agentImage: props.agentImage,
      }),
      user: GATEWAY_UID,
      essential: true,
      readonlyRootFilesystem: true,
      stopTimeout: Duration.seconds(props.timings.stopTimeoutSeconds),
      memoryLimitMiB: gatewayMemoryMiB,
      linuxParameters: new ecs.LinuxParameters(this, "GatewayLinux", { initProcessEnabled: true }),
      environment: {
        // The AWS SDK's region (DynamoDB); Fargate's task role provides the credentials.
        AWS_REGION: Stack.of(this).region,
        NODE_OPTIONS: `--max-old-space-size=${Math.floor(gatewayMemoryMiB * HEAP_SHARE)}`,
      },
      secrets,
      portMappings: Object.values(GATEWAY_PORTS).map((containerPort) => ({
        containerPort,
        protocol: ecs.Protocol.TCP,
      })),
      healthCheck: {
        command: CONTAINER_HEALTH_CHECK,
        interval: Duration.seconds(10),
        timeout: Duration.seconds(5),
        retries: 3,
        startPeriod: Duration.seconds(30),
      },
      logging: ecs.LogDrivers.firelens({}),
    });
    this.container.addContainerDependencies({
      container: logRouter,
      condition: ecs.ContainerDependencyCondition.START,
    });

    // The task role: the table (registry and tenants) and writing its three log groups (the log
    // router runs with the task role). Secrets are read by the execution role, at start only.
    // No cloudwatch:PutMetricData: metrics reach CloudWatch as log events (EMF).
    props.registry.grantGateway(this.taskDefinition.taskRole);
    for (const group of [props.opsLogGroup, props.auditLogGroup, props.metricsLogGroup]) {
      group.grant(this.taskDefinition.taskRole, "logs:CreateLogStream", "logs:PutLogEvents");
    }

    this.service = new ecs.FargateService(this, "Service", {
      cluster: props.cluster,
      taskDefinition: this.taskDefinition,
      desiredCount: props.desiredCount,
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
      circuitBreaker: { enable: true, rollback: true },
      securityGroups: [props.taskSecurityGroup],
      assignPublicIp: false,
      // Time for the first /healthz after the image is pulled and the secrets are read.
      healthCheckGracePeriod: Duration.seconds(60),
      platformVersion: ecs.FargatePlatformVersion.LATEST,
      propagateTags: ecs.PropagatedTagSource.SERVICE,
    });
  }
}
