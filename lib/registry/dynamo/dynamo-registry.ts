/**
 * The fleet registry on DynamoDB (table.ts). Each method is one request, or one paginated
 * Query, with the condition that fences it written out next to it; docs/REGISTRY.md lists them
 * all with their costs. ConditionalCheckFailedException is an outcome here (LeaseLostError, a
 * superseded claim, a fenced release); anything else the SDK throws after its retries is
 * RegistryUnavailableError.
 */
import {
  type AttributeValue,
  DeleteItemCommand,
  type DynamoDBClient,
  PutItemCommand,
  QueryCommand,
  type QueryCommandInput,
  type QueryCommandOutput,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { LeaseLostError, RegistryUnavailableError } from "../errors.js";
import type { ClaimOutcome, FleetRegistry, ReleaseOutcome } from "../fleet-registry.js";
import { checkInstanceId, checkLease, checkRow, checkTenant } from "../keys.js";
import type { InstanceLease, LeaseWrite, Listing, OwnerFence, OwnerRow } from "../model.js";
import { createDynamoClient, type DynamoClientOptions } from "./client.js";
import { describeDynamoError, isConditionFailed } from "./errors.js";
import {
  decodeLease,
  decodeOwner,
  INSTANCES_PK,
  type Item,
  leaseItem,
  leaseKey,
  n,
  ownerItem,
  ownerKey,
  ownersPk,
  s,
} from "./items.js";
import { OWNER_INSTANCE_ATTRIBUTE, OWNERS_BY_INSTANCE_INDEX } from "./table.js";

/** Named conditions: each is the whole fencing rule of one write. */
const CONDITIONS = {
  /** A lease is ours to write unless a newer incarnation of the same id has taken it. */
  heartbeat: "attribute_not_exists(pk) OR incarnation <= :inc",
  /** Only the incarnation that holds the lease ends it. */
  releaseLease: "incarnation = :inc",
  /** The sweeper deletes a lease only if nobody renewed it since it was read. */
  removeLease: "incarnation = :inc AND heartbeatAt = :hb AND expiresAt = :exp",
  /**
   * A newer (incarnation, session) replaces a row; the same one rewrites it (a retried claim, a
   * TTL re-stamp); an older one is refused. `<=` rather than `<` for the same session makes a
   * claim idempotent: a retry of a claim that landed but whose answer was lost still succeeds.
   */
  claim: "attribute_not_exists(pk) OR incarnation < :inc OR (incarnation = :inc AND #session <= :session)",
  /** A release deletes exactly the row it released, never a newer one. */
  release: "incarnation = :inc AND #session = :session",
} as const;

/** `session` is a DynamoDB reserved word. */
const SESSION_NAME = { "#session": "session" };

export interface DynamoRegistryOptions {
  tableName: string;
  /** A client to use (not closed by close()); default: one from `clientOptions`. */
  client?: DynamoDBClient;
  clientOptions?: DynamoClientOptions;
  /** ms since the epoch, for TTL stamps; Date.now by default. */
  clock?: () => number;
}

export class DynamoRegistry implements FleetRegistry {
  private readonly client: DynamoDBClient;
  private readonly ownsClient: boolean;
  private readonly table: string;
  private readonly clock: () => number;

  constructor(options: DynamoRegistryOptions) {
    this.table = options.tableName;
    this.client = options.client ?? createDynamoClient(options.clientOptions);
    this.ownsClient = options.client === undefined;
    this.clock = options.clock ?? Date.now;
  }

  async heartbeat(lease: LeaseWrite): Promise<void> {
    checkLease(lease);
    const ok = await this.conditional("heartbeat", () =>
      this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: leaseItem(lease),
          ConditionExpression: CONDITIONS.heartbeat,
          ExpressionAttributeValues: { ":inc": n(lease.incarnation) },
        }),
      ),
    );
    if (!ok) throw new LeaseLostError(lease.instanceId, lease.incarnation);
  }

  async releaseLease(instanceId: string, incarnation: number, now: number): Promise<void> {
    await this.conditional("release lease", () =>
      this.client.send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: leaseKey(checkInstanceId(instanceId)),
          UpdateExpression: "SET expiresAt = :now, draining = :true",
          ConditionExpression: CONDITIONS.releaseLease,
          ExpressionAttributeValues: { ":inc": n(incarnation), ":now": n(now), ":true": { BOOL: true } },
        }),
      ),
    );
  }

  async removeLease(lease: InstanceLease): Promise<boolean> {
    return this.conditional("remove lease", () =>
      this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: leaseKey(checkInstanceId(lease.instanceId)),
          ConditionExpression: CONDITIONS.removeLease,
          ExpressionAttributeValues: {
            ":inc": n(lease.incarnation),
            ":hb": n(lease.heartbeatAt),
            ":exp": n(lease.expiresAt),
          },
        }),
      ),
    );
  }

  async listInstances(): Promise<Listing<InstanceLease>> {
    return this.query(
      "list instances",
      {
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": s(INSTANCES_PK) },
        ConsistentRead: true,
      },
      decodeLease,
    );
  }

  async claim(row: OwnerRow): Promise<ClaimOutcome> {
    checkRow(row);
    const ok = await this.conditional("claim", () =>
      this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: ownerItem(row, this.clock()),
          ConditionExpression: CONDITIONS.claim,
          ExpressionAttributeNames: SESSION_NAME,
          ExpressionAttributeValues: { ":inc": n(row.incarnation), ":session": n(row.session) },
        }),
      ),
    );
    return ok ? "claimed" : "superseded";
  }

  async release(row: OwnerFence): Promise<ReleaseOutcome> {
    checkTenant(row.tenant);
    const ok = await this.conditional("release", () =>
      this.client.send(
        new DeleteItemCommand({
          TableName: this.table,
          Key: ownerKey(row),
          ConditionExpression: CONDITIONS.release,
          ExpressionAttributeNames: SESSION_NAME,
          ExpressionAttributeValues: { ":inc": n(row.incarnation), ":session": n(row.session) },
        }),
      ),
    );
    return ok ? "released" : "fenced";
  }

  async ownersOf(tenant: string): Promise<Listing<OwnerRow>> {
    return this.query(
      "owners of tenant",
      {
        KeyConditionExpression: "pk = :pk",
        ExpressionAttributeValues: { ":pk": s(ownersPk(checkTenant(tenant))) },
        ConsistentRead: true,
      },
      decodeOwner,
    );
  }

  async rowsOfInstance(instanceId: string): Promise<Listing<OwnerRow>> {
    return this.query(
      "rows of instance",
      {
        IndexName: OWNERS_BY_INSTANCE_INDEX,
        KeyConditionExpression: "#owner = :id",
        ExpressionAttributeNames: { "#owner": OWNER_INSTANCE_ATTRIBUTE },
        ExpressionAttributeValues: { ":id": s(checkInstanceId(instanceId)) },
      },
      decodeOwner,
    );
  }

  async close(): Promise<void> {
    if (this.ownsClient) this.client.destroy();
  }

  /** Sends a conditional write: true if it was applied, false if its condition failed. */
  private async conditional(what: string, send: () => Promise<unknown>): Promise<boolean> {
    try {
      await send();
      return true;
    } catch (err) {
      if (isConditionFailed(err)) return false;
      throw new RegistryUnavailableError(`${what}: ${describeDynamoError(err)}`, { cause: err });
    }
  }

  /** Every page of a Query, decoded; items that do not decode are reported, not thrown. */
  private async query<T>(
    what: string,
    input: Omit<QueryCommandInput, "TableName">,
    decode: (item: Item) => T,
  ): Promise<Listing<T>> {
    const items: T[] = [];
    const unreadable: Error[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      let page: QueryCommandOutput;
      try {
        page = await this.client.send(
          new QueryCommand({ ...input, TableName: this.table, ExclusiveStartKey: start }),
        );
      } catch (err) {
        throw new RegistryUnavailableError(`${what}: ${describeDynamoError(err)}`, { cause: err });
      }
      for (const item of page.Items ?? []) {
        try {
          items.push(decode(item));
        } catch (err) {
          unreadable.push(err as Error);
        }
      }
      start = page.LastEvaluatedKey;
    } while (start);
    return { items, unreadable };
  }
}
