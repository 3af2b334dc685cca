import { Match, Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import { GATEWAY_TABLE_ACTIONS } from "../../cdk/lib/constructs/registry-table.js";
import { PEM_ENV } from "../../cdk/lib/gateway-command.js";
import { lifecycleTimings, tcpIdleTimeoutSeconds } from "../../cdk/lib/timing.js";
import { OWNERS_BY_INSTANCE_INDEX } from "../../lib/registry/dynamo/table.js";
import { synthStacks, TEST_DOMAIN } from "./fixtures.js";

const stacks = synthStacks({
  desiredCount: 3,
  maxCount: 9,
  alarmTopicArn: "arn:aws:sns:eu-west-1:123456789012:oncall",
});
const template = Template.fromStack(stacks.service);
const statefulId = (prefix: string) =>
  Object.keys(Template.fromStack(stacks.stateful).toJSON().Resources).find((k) => k.startsWith(prefix))!;
const timings = lifecycleTimings();

type Resource = { Type: string; Properties: Record<string, unknown> };
const resources = (type: string): Resource[] => Object.values(template.findResources(type)) as Resource[];
const logicalId = (type: string, prefix: string): string =>
  Object.entries(template.findResources(type)).find(([k]) => k.startsWith(prefix))![0];
const attributes = (tg: Resource): Record<string, string> =>
  Object.fromEntries(
    (tg.Properties.TargetGroupAttributes as { Key: string; Value: string }[]).map((a) => [a.Key, a.Value]),
  );

describe("the service stack: load balancer", () => {
  it("passes TCP 8132 through with an idle timeout above every keepalive", () => {
    template.hasResourceProperties("AWS::ElasticLoadBalancingV2::Listener", {
      Port: 8132,
      Protocol: "TCP",
      ListenerAttributes: [{ Key: "tcp.idle_timeout.seconds", Value: String(tcpIdleTimeoutSeconds()) }],
    });
    expect(tcpIdleTimeoutSeconds()).toBe(3900);
  });

  it("terminates TLS 443 with the ACM certificate (DNS-validated in the zone) and re-encrypts to 8443", () => {
    template.hasResourceProperties("AWS::ElasticLoadBalancingV2::Listener", {
      Port: 443,
      Protocol: "TLS",
      Certificates: [
        {
          CertificateArn: {
            Ref: logicalId("AWS::CertificateManager::Certificate", "LoadBalancerInstallCertificate"),
          },
        },
      ],
      SslPolicy: "ELBSecurityPolicy-TLS13-1-2-2021-06",
    });
    template.hasResourceProperties("AWS::CertificateManager::Certificate", {
      DomainName: TEST_DOMAIN,
      ValidationMethod: "DNS",
    });
    template.hasResourceProperties("AWS::Route53::RecordSet", { Name: `${TEST_DOMAIN}.`, Type: "A" });
    template.hasResourceProperties("AWS::ElasticLoadBalancingV2::TargetGroup", {
      Port: 8443,
      Protocol: "TLS",
    });
  });

  it("is internet-facing, cross-zone, and behind its own security group", () => {
    template.hasResourceProperties("AWS::ElasticLoadBalancingV2::LoadBalancer", {
      Type: "network",
      Scheme: "internet-facing",
      SecurityGroups: [
        {
          "Fn::GetAtt": [logicalId("AWS::EC2::SecurityGroup", "NetworkLoadBalancerSecurityGroup"), "GroupId"],
        },
      ],
      LoadBalancerAttributes: Match.arrayWith([{ Key: "load_balancing.cross_zone.enabled", Value: "true" }]),
    });
  });

  it.each([8132, 8443])(
    "target group %i: IP targets, client IP preserved, drain matched to the grace, /healthz on 8134",
    (port) => {
      const tg = resources("AWS::ElasticLoadBalancingV2::TargetGroup").find(
        (r) => r.Properties.Port === port,
      )!;
      expect(tg.Properties).toMatchObject({
        TargetType: "ip",
        HealthCheckProtocol: "HTTP",
        HealthCheckPort: "8134",
        HealthCheckPath: "/healthz",
        HealthCheckIntervalSeconds: 10,
        HealthyThresholdCount: 2,
        UnhealthyThresholdCount: 2,
      });
      expect(attributes(tg)).toMatchObject({
        "preserve_client_ip.enabled": "true",
        "deregistration_delay.timeout_seconds": String(timings.deregistrationDelaySeconds),
        "deregistration_delay.connection_termination.enabled": "false",
      });
    },
  );
});

describe("the service stack: tasks", () => {
  const taskDefinition = resources("AWS::ECS::TaskDefinition")[0]!;
  const containers = taskDefinition.Properties.ContainerDefinitions as Record<string, unknown>[];
  const gateway = containers.find((c) => c.Name === "gateway")!;
  const router = containers.find((c) => c.Name === "log-router")!;

  it("runs at least two tasks, rolling with the circuit breaker and rollback", () => {
    template.hasResourceProperties("AWS::ECS::Service", {
      DesiredCount: 3,
      LaunchType: "FARGATE",
      DeploymentConfiguration: {
        MinimumHealthyPercent: 100,
        MaximumPercent: 200,
        DeploymentCircuitBreaker: { Enable: true, Rollback: true },
      },
      HealthCheckGracePeriodSeconds: 60,
      NetworkConfiguration: {
        AwsvpcConfiguration: Match.objectLike({
          AssignPublicIp: "DISABLED",
          SecurityGroups: [
            { "Fn::GetAtt": [logicalId("AWS::EC2::SecurityGroup", "NetworkTaskSecurityGroup"), "GroupId"] },
          ],
        }),
      },
    });
  });

  it("stops within Fargate's limit, after the grace period, as UID 65532 on a read-only root", () => {
    expect(gateway).toMatchObject({
      StopTimeout: timings.stopTimeoutSeconds,
      User: "65532",
      ReadonlyRootFilesystem: true,
      EntryPoint: ["kgw"],
      Essential: true,
      LinuxParameters: { InitProcessEnabled: true },
    });
    expect(timings.stopTimeoutSeconds).toBeLessThanOrEqual(120);
    expect(gateway.Command).toContain(`--graceful-shutdown-timeout=${timings.gracefulShutdownSeconds}s`);
    expect(gateway.Command).toContain(`--install-gateway-address=${TEST_DOMAIN}:8132`);
    expect(gateway.Command).toContain("--audit-log=-");
  });

  it("maps every gateway port and checks /healthz itself", () => {
    expect((gateway.PortMappings as { ContainerPort: number }[]).map((p) => p.ContainerPort).sort()).toEqual([
      8132, 8133, 8134, 8135, 8443,
    ]);
    expect(JSON.stringify(gateway.HealthCheck)).toContain("http://127.0.0.1:8134/healthz");
  });

  it("gets its PEMs from the TLS secrets only, never from a CA secret", () => {
    const secrets = gateway.Secrets as { Name: string; ValueFrom: unknown }[];
    expect(secrets.map((s) => s.Name).sort()).toEqual(Object.values(PEM_ENV).sort());
    const from = JSON.stringify(secrets);
    expect(from).toContain(statefulId("SecretsGatewayTls"));
    expect(from).toContain(statefulId("SecretsPeerTls"));
    expect(from).not.toContain(statefulId("SecretsGatewayCa"));
    expect(from).not.toContain(statefulId("SecretsPeerCa"));
  });

  it("sends its logs through the FireLens router, which splits ops, metrics and audit", () => {
    expect(gateway.LogConfiguration).toEqual({ LogDriver: "awsfirelens" });
    expect(gateway.DependsOn).toEqual([{ ContainerName: "log-router", Condition: "START" }]);
    expect(router).toMatchObject({
      Essential: true,
      FirelensConfiguration: {
        Type: "fluentbit",
        Options: { "config-file-type": "file", "config-file-value": "/fluent-bit/etc/kgw.conf" },
      },
    });
    const env = Object.fromEntries(
      (router.Environment as { Name: string; Value: unknown }[]).map((e) => [e.Name, e.Value]),
    );
    expect(env.KGW_OPS_LOG_GROUP).toEqual({ Ref: logicalId("AWS::Logs::LogGroup", "OpsLog") });
    expect(JSON.stringify(env.KGW_AUDIT_LOG_GROUP)).toContain(statefulId("AuditLog"));
    expect(env.KGW_METRICS_LOG_GROUP).toEqual({ Ref: logicalId("AWS::Logs::LogGroup", "MetricsLog") });
  });
});

describe("the service stack: IAM, exactly", () => {
  const policies = resources("AWS::IAM::Policy");
  const roleId = (prefix: string) => logicalId("AWS::IAM::Role", prefix);
  const policyOf = (role: string) =>
    policies.find((p) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId(role) }]))!
      .Properties.PolicyDocument as { Statement: { Action: string | string[]; Resource: unknown }[] };

  it("task role: the table's five item actions, Query on its index, and writing its three log groups", () => {
    const statements = policyOf("GatewayTaskTaskRole").Statement;
    expect(statements).toHaveLength(5);
    expect(statements[0]!.Action).toEqual([...GATEWAY_TABLE_ACTIONS]);
    expect(JSON.stringify(statements[0]!.Resource)).toContain(statefulId("RegistryTable"));
    expect(statements[1]!.Action).toBe("dynamodb:Query");
    expect(JSON.stringify(statements[1]!.Resource)).toContain(`/index/${OWNERS_BY_INSTANCE_INDEX}`);
    for (const s of statements.slice(2))
      expect(s.Action).toEqual(["logs:CreateLogStream", "logs:PutLogEvents"]);
    const all = JSON.stringify(statements);
    expect(all).not.toMatch(/dynamodb:(Scan|Batch|Transact|\*)/);
    expect(all).not.toContain("secretsmanager");
    expect(all).not.toContain("cloudwatch:");
  });

  it("execution role: reads the two TLS secrets and nothing else of Secrets Manager", () => {
    const statements = policyOf("GatewayTaskExecutionRole").Statement;
    const secretStatements = statements.filter((s) => JSON.stringify(s.Action).includes("secretsmanager"));
    expect(secretStatements.flatMap((s) => [s.Action].flat())).toEqual(
      expect.arrayContaining(["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"]),
    );
    const resources = JSON.stringify(secretStatements.map((s) => s.Resource));
    expect(resources).toContain(statefulId("SecretsGatewayTls"));
    expect(resources).toContain(statefulId("SecretsPeerTls"));
    expect(resources).not.toContain(statefulId("SecretsGatewayCa"));
    expect(resources).not.toContain(statefulId("SecretsPeerCa"));
  });
});

describe("the service stack: security groups", () => {
  const nlbSg = logicalId("AWS::EC2::SecurityGroup", "NetworkLoadBalancerSecurityGroup");
  const taskSg = logicalId("AWS::EC2::SecurityGroup", "NetworkTaskSecurityGroup");
  const ingress = resources("AWS::EC2::SecurityGroupIngress").map((r) => r.Properties);
  const taskGroup = resources("AWS::EC2::SecurityGroup").find((r) =>
    String(r.Properties.GroupDescription).startsWith("kgw gateway tasks"),
  )!;

  it("lets the NLB reach 8132, 8443 and 8134 on the tasks, and nothing else", () => {
    const fromNlb = ingress.filter((r) => JSON.stringify(r.SourceSecurityGroupId).includes(nlbSg));
    expect(fromNlb.map((r) => r.FromPort).sort()).toEqual([8132, 8134, 8443]);
  });

  it("opens the peer port only to the service's own tasks", () => {
    const peer = ingress.filter((r) => r.FromPort === 8135);
    expect(peer).toHaveLength(1);
    expect(peer[0]).toMatchObject({
      GroupId: { "Fn::GetAtt": [taskSg, "GroupId"] },
      SourceSecurityGroupId: { "Fn::GetAtt": [taskSg, "GroupId"] },
    });
  });

  it("opens the admin port to the VPC's CIDR only, and no port of the tasks to the internet", () => {
    const inline = taskGroup.Properties.SecurityGroupIngress as { CidrIp: string; FromPort: number }[];
    expect(inline).toEqual([
      expect.objectContaining({ CidrIp: "10.0.0.0/16", FromPort: 8133, ToPort: 8133 }),
    ]);
  });

  it("lets clients reach only 8132 and 443 on the NLB", () => {
    template.hasResourceProperties("AWS::EC2::SecurityGroup", {
      GroupDescription: Match.stringLikeRegexp("^kgw NLB"),
      SecurityGroupIngress: [
        Match.objectLike({ CidrIp: "0.0.0.0/0", FromPort: 8132, ToPort: 8132 }),
        Match.objectLike({ CidrIp: "0.0.0.0/0", FromPort: 443, ToPort: 443 }),
      ],
    });
  });
});

describe("the service stack: scaling, logs and alarms", () => {
  it("scales between the desired and the maximum count on CPU and on NLB flows per healthy task", () => {
    template.hasResourceProperties("AWS::ApplicationAutoScaling::ScalableTarget", {
      MinCapacity: 3,
      MaxCapacity: 9,
    });
    template.hasResourceProperties("AWS::ApplicationAutoScaling::ScalingPolicy", {
      TargetTrackingScalingPolicyConfiguration: Match.objectLike({
        PredefinedMetricSpecification: { PredefinedMetricType: "ECSServiceAverageCPUUtilization" },
        TargetValue: 60,
      }),
    });
    template.hasResourceProperties("AWS::ApplicationAutoScaling::ScalingPolicy", {
      TargetTrackingScalingPolicyConfiguration: Match.objectLike({
        TargetValue: 5000,
        CustomizedMetricSpecification: {
          Metrics: [
            Match.objectLike({
              Id: "flows0",
              MetricStat: Match.objectLike({ Metric: Match.objectLike({ MetricName: "ActiveFlowCount" }) }),
            }),
            Match.objectLike({
              Id: "flows1",
              MetricStat: Match.objectLike({ Metric: Match.objectLike({ MetricName: "ActiveFlowCount" }) }),
            }),
            Match.objectLike({
              Id: "tasks",
              MetricStat: Match.objectLike({ Metric: Match.objectLike({ MetricName: "HealthyHostCount" }) }),
            }),
            Match.objectLike({
              Id: "flowsPerTask",
              Expression: "(flows0 + flows1) / tasks",
              ReturnData: true,
            }),
          ],
        },
      }),
    });
  });

  it("keeps operational logs for their retention", () => {
    template.hasResourceProperties("AWS::Logs::LogGroup", { RetentionInDays: 30 });
    for (const g of resources("AWS::Logs::LogGroup")) expect(g.Properties.RetentionInDays).toBeDefined();
  });
});

describe("an existing VPC", () => {
  it("is looked up by id, and no VPC is created", () => {
    const { service } = synthStacks({ vpcId: "vpc-0123456789abcdef0" });
    const t = Template.fromStack(service);
    t.resourceCountIs("AWS::EC2::VPC", 0);
    t.resourceCountIs("AWS::EC2::NatGateway", 0);
    t.resourceCountIs("AWS::ECS::Service", 1);
  });
});

describe("the service stack: outputs", () => {
  it("names the cluster, the service and the ops log group, for aws ecs update-service and log queries", () => {
    const outputs = template.findOutputs("*");
    expect(outputs.ClusterName?.Value).toEqual({ Ref: logicalId("AWS::ECS::Cluster", "Cluster") });
    expect(outputs.ServiceName?.Value).toEqual({
      "Fn::GetAtt": [logicalId("AWS::ECS::Service", "Gateway"), "Name"],
    });
    expect(outputs.OpsLogGroupName?.Value).toEqual({ Ref: logicalId("AWS::Logs::LogGroup", "OpsLog") });
  });
});
