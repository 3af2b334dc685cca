import { CfnOutput, RemovalPolicy, Stack, type StackProps } from "aws-cdk-lib";
import type * as dynamodb from "aws-cdk-lib/aws-dynamodb";
import * as logs from "aws-cdk-lib/aws-logs";
import type { Construct } from "constructs";
import { GatewaySecrets } from "./constructs/gateway-secrets.js";
import { RegistryTable } from "./constructs/registry-table.js";
import { retentionDays } from "./log-retention.js";

export interface StatefulStackProps extends StackProps {
  auditLogRetentionDays: number;
}

/**
 * What outlives a deployment of the service: the registry and tenant table, the secrets, and the
 * audit log. Every resource here is retained when the stack is deleted (docs/DEPLOY.md,
 * "Teardown"), and the service stack can be destroyed and rebuilt without touching it.
 */
export class StatefulStack extends Stack {
  readonly registry: RegistryTable;
  readonly secrets: GatewaySecrets;
  readonly auditLogGroup: logs.LogGroup;

  get table(): dynamodb.TableV2 {
    return this.registry.table;
  }

  constructor(scope: Construct, id: string, props: StatefulStackProps) {
    super(scope, id, props);
    this.registry = new RegistryTable(this, "Registry");
    this.secrets = new GatewaySecrets(this, "Secrets");
    // The audit trail: one record per dial. Kept apart from the operational logs, with its own
    // retention, and kept when the stack goes.
    this.auditLogGroup = new logs.LogGroup(this, "AuditLog", {
      retention: retentionDays(props.auditLogRetentionDays),
      removalPolicy: RemovalPolicy.RETAIN,
    });

    new CfnOutput(this, "TableName", {
      value: this.table.tableName,
      description: "kgw tenant --table",
    });
    new CfnOutput(this, "GatewayCaSecretArn", {
      value: this.secrets.gatewayCa.secretArn,
      description: "kgw tenant --ca-secret; put kgw pki ca's ca-secret.json here",
    });
    new CfnOutput(this, "GatewayTlsSecretArn", {
      value: this.secrets.gatewayTls.secretArn,
      description: "put kgw pki serving's tls-secret.json here",
    });
    new CfnOutput(this, "PeerCaSecretArn", {
      value: this.secrets.peerCa.secretArn,
      description: "put kgw pki ca --peer's ca-secret.json here",
    });
    new CfnOutput(this, "PeerTlsSecretArn", {
      value: this.secrets.peerTls.secretArn,
      description: "put kgw pki peer's tls-secret.json here",
    });
    new CfnOutput(this, "AuditLogGroupName", { value: this.auditLogGroup.logGroupName });
  }
}
