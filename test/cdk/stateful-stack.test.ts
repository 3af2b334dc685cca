import { Match, Template } from "aws-cdk-lib/assertions";
import { describe, expect, it } from "vitest";
import {
  GLOBAL_SECONDARY_INDEXES,
  OWNERS_BY_INSTANCE_INDEX,
  PARTITION_KEY,
  SORT_KEY,
  TTL_ATTRIBUTE,
} from "../../lib/registry/dynamo/table.js";
import { synthStacks } from "./fixtures.js";

const { stateful } = synthStacks({ auditLogRetentionDays: 731 });
const template = Template.fromStack(stateful);

describe("the stateful stack", () => {
  it("creates the registry table from lib/registry's schema: on-demand, PITR, TTL, deletion protection", () => {
    template.resourceCountIs("AWS::DynamoDB::GlobalTable", 1);
    template.hasResourceProperties("AWS::DynamoDB::GlobalTable", {
      BillingMode: "PAY_PER_REQUEST",
      KeySchema: [
        { AttributeName: PARTITION_KEY, KeyType: "HASH" },
        { AttributeName: SORT_KEY, KeyType: "RANGE" },
      ],
      TimeToLiveSpecification: { AttributeName: TTL_ATTRIBUTE, Enabled: true },
      Replicas: [
        Match.objectLike({
          PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
          DeletionProtectionEnabled: true,
        }),
      ],
      GlobalSecondaryIndexes: [
        {
          IndexName: OWNERS_BY_INSTANCE_INDEX,
          KeySchema: GLOBAL_SECONDARY_INDEXES[0]!.KeySchema,
          Projection: GLOBAL_SECONDARY_INDEXES[0]!.Projection,
        },
      ],
    });
  });

  it("retains the table, the four secrets and the audit log when the stack is deleted", () => {
    for (const type of ["AWS::DynamoDB::GlobalTable", "AWS::SecretsManager::Secret", "AWS::Logs::LogGroup"]) {
      const resources = Object.values(template.findResources(type));
      expect(resources.length).toBeGreaterThan(0);
      for (const r of resources) {
        expect(r).toMatchObject({ DeletionPolicy: "Retain", UpdateReplacePolicy: "Retain" });
      }
    }
    template.resourceCountIs("AWS::SecretsManager::Secret", 4);
  });

  it("stores no certificate through CloudFormation: the secrets start as an empty object", () => {
    for (const r of Object.values(template.findResources("AWS::SecretsManager::Secret"))) {
      expect(r.Properties.SecretString).toBe("{}");
      expect(r.Properties.GenerateSecretString).toBeUndefined();
    }
  });

  it("keeps the audit log for its own retention", () => {
    template.hasResourceProperties("AWS::Logs::LogGroup", { RetentionInDays: 731 });
  });

  it("is termination-protected", () => {
    expect(stateful.terminationProtection).toBe(true);
  });

  it("names what the operator needs in its outputs", () => {
    const outputs = Object.keys(template.findOutputs("*"));
    expect(outputs).toEqual(
      expect.arrayContaining([
        "TableName",
        "GatewayCaSecretArn",
        "GatewayTlsSecretArn",
        "PeerCaSecretArn",
        "PeerTlsSecretArn",
        "AuditLogGroupName",
      ]),
    );
  });
});
