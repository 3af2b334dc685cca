import { RemovalPolicy } from "aws-cdk-lib";
import * as dynamodb from "aws-cdk-lib/aws-dynamodb";
import * as iam from "aws-cdk-lib/aws-iam";
import { Construct } from "constructs";
import {
  ATTRIBUTE_DEFINITIONS,
  GLOBAL_SECONDARY_INDEXES,
  PARTITION_KEY,
  SORT_KEY,
  TTL_ATTRIBUTE,
} from "../../../lib/registry/dynamo/table.js";

/**
 * What the gateway does with the table (lib/registry/dynamo, the tenant store): single-item
 * reads and conditional writes, and queries of one partition or of the index. No Scan, no
 * batch, no transaction: a task role that cannot do them documents that the code does not.
 */
export const GATEWAY_TABLE_ACTIONS = [
  "dynamodb:GetItem",
  "dynamodb:Query",
  "dynamodb:PutItem",
  "dynamodb:UpdateItem",
  "dynamodb:DeleteItem",
] as const;

const attributeType = (name: string): dynamodb.AttributeType => {
  const def = ATTRIBUTE_DEFINITIONS.find((d) => d.AttributeName === name);
  switch (def?.AttributeType) {
    case "S":
      return dynamodb.AttributeType.STRING;
    case "N":
      return dynamodb.AttributeType.NUMBER;
    case "B":
      return dynamodb.AttributeType.BINARY;
    default:
      throw new Error(`registry table: attribute ${name} has no definition in lib/registry/dynamo/table.ts`);
  }
};

const attribute = (name: string): dynamodb.Attribute => ({ name, type: attributeType(name) });

/**
 * The fleet's one table (registry and tenant store), built from the schema the code exports, so
 * the deployed table cannot drift from what lib/registry expects. Stateful: on-demand, with
 * point-in-time recovery, deletion protection, and kept when its stack is deleted.
 */
export class RegistryTable extends Construct {
  readonly table: dynamodb.TableV2;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    this.table = new dynamodb.TableV2(this, "Table", {
      partitionKey: attribute(PARTITION_KEY),
      sortKey: attribute(SORT_KEY),
      billing: dynamodb.Billing.onDemand(),
      timeToLiveAttribute: TTL_ATTRIBUTE,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
      globalSecondaryIndexes: GLOBAL_SECONDARY_INDEXES.map((index) => {
        const hash = index.KeySchema?.find((k) => k.KeyType === "HASH")?.AttributeName;
        const range = index.KeySchema?.find((k) => k.KeyType === "RANGE")?.AttributeName;
        if (!index.IndexName || !hash) throw new Error("registry table: an index without a name or key");
        const projection = index.Projection?.ProjectionType ?? "ALL";
        return {
          indexName: index.IndexName,
          partitionKey: attribute(hash),
          ...(range ? { sortKey: attribute(range) } : {}),
          projectionType: dynamodb.ProjectionType[projection as keyof typeof dynamodb.ProjectionType],
          ...(projection === "INCLUDE"
            ? { nonKeyAttributes: [...(index.Projection?.NonKeyAttributes ?? [])] }
            : {}),
        };
      }),
    });
  }

  /**
   * Exactly GATEWAY_TABLE_ACTIONS on this table, and Query on each of its indexes by name: no
   * wildcard (`index/*`), so an index added later is not readable until it is granted here.
   */
  grantGateway(grantee: iam.IGrantable): void {
    grantee.grantPrincipal.addToPrincipalPolicy(
      new iam.PolicyStatement({ actions: [...GATEWAY_TABLE_ACTIONS], resources: [this.table.tableArn] }),
    );
    const indexes = GLOBAL_SECONDARY_INDEXES.map((i) => `${this.table.tableArn}/index/${i.IndexName}`);
    if (indexes.length > 0) {
      grantee.grantPrincipal.addToPrincipalPolicy(
        new iam.PolicyStatement({ actions: ["dynamodb:Query"], resources: indexes }),
      );
    }
  }
}
