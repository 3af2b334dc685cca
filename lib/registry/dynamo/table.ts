/**
 * The one table of a hosted fleet, as data: the CDK app (cdk/) creates it from these constants
 * and tests and local runs create it with `createTable`, so the two cannot drift. Every item
 * shape, key and condition is in docs/REGISTRY.md.
 *
 *   pk                 sk                       what
 *   tenants            <tenantId>               a tenant record (lib/tenancy/dynamo-store)
 *   meta               tenants-generation       a counter bumped after every tenant write
 *   instances          <instanceId>             an instance's lease
 *   owners#<tenant>    <instanceId>#<agentId>   an ownership row (agentId escaped, keys.ts)
 *
 * One global secondary index, OWNERS_BY_INSTANCE_INDEX, keyed by `ownerInstance`, which only
 * ownership rows carry (a sparse index): the sweeper finds a dead instance's rows without a
 * Scan. `ttl` (epoch seconds) is the TTL attribute: garbage collection, never correctness.
 */
import {
  type AttributeDefinition,
  CreateTableCommand,
  type CreateTableCommandInput,
  type DynamoDBClient,
  type GlobalSecondaryIndex,
  type KeySchemaElement,
} from "@aws-sdk/client-dynamodb";

export const PARTITION_KEY = "pk";
export const SORT_KEY = "sk";
/** The TTL attribute (epoch seconds). The CDK app enables TTL on it; dynalite has no TTL. */
export const TTL_ATTRIBUTE = "ttl";
export const OWNERS_BY_INSTANCE_INDEX = "owners-by-instance";
/** The index's partition key: the instance id, on ownership rows only. */
export const OWNER_INSTANCE_ATTRIBUTE = "ownerInstance";

export const KEY_SCHEMA: readonly KeySchemaElement[] = [
  { AttributeName: PARTITION_KEY, KeyType: "HASH" },
  { AttributeName: SORT_KEY, KeyType: "RANGE" },
];

export const ATTRIBUTE_DEFINITIONS: readonly AttributeDefinition[] = [
  { AttributeName: PARTITION_KEY, AttributeType: "S" },
  { AttributeName: SORT_KEY, AttributeType: "S" },
  { AttributeName: OWNER_INSTANCE_ATTRIBUTE, AttributeType: "S" },
];

/**
 * Keyed by (ownerInstance, pk): unique per (instance, tenant, agent) once sk's instance prefix is
 * dropped, and sorted by tenant. It projects only what a conditional delete needs.
 */
export const GLOBAL_SECONDARY_INDEXES: readonly GlobalSecondaryIndex[] = [
  {
    IndexName: OWNERS_BY_INSTANCE_INDEX,
    KeySchema: [
      { AttributeName: OWNER_INSTANCE_ATTRIBUTE, KeyType: "HASH" },
      { AttributeName: PARTITION_KEY, KeyType: "RANGE" },
    ],
    Projection: {
      ProjectionType: "INCLUDE",
      NonKeyAttributes: ["tenant", "agentId", "incarnation", "session", "connectedAt"],
    },
  },
];

/** On-demand capacity: the load follows agent churn, which is bursty (docs/REGISTRY.md). */
export const BILLING_MODE = "PAY_PER_REQUEST";

export function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    BillingMode: BILLING_MODE,
    KeySchema: [...KEY_SCHEMA],
    AttributeDefinitions: [...ATTRIBUTE_DEFINITIONS],
    GlobalSecondaryIndexes: GLOBAL_SECONDARY_INDEXES.map((i) => ({ ...i })),
  };
}

/**
 * Creates the table, for tests and local runs only (hosted tables come from the CDK app, with
 * TTL, point-in-time recovery and a retain policy). dynalite with createTableMs 0 makes it
 * ACTIVE at once; against anything slower, wait for ACTIVE before use.
 */
export async function createTable(client: DynamoDBClient, tableName: string): Promise<void> {
  await client.send(new CreateTableCommand(createTableInput(tableName)));
}
