/**
 * The tenant store on DynamoDB, in the fleet's table (lib/registry/dynamo/table.ts). Same
 * contract as the file store (../store.ts):
 *
 * - A tenant is one item: pk `tenants`, sk `<id>`, `record` (the codec's JSON text, byte for
 *   byte what the file store writes) and `version` (N), which must agree with the record's.
 * - `get` is a strongly consistent GetItem; `list` a strongly consistent, paginated Query of the
 *   `tenants` partition (consistent, so a watcher that saw the generation move also sees the
 *   write that moved it).
 * - `put` reads the current item first (a corrupt record must not be overwritten: its version
 *   is unknown), then writes with `attribute_not_exists(pk)` for version 1 or
 *   `version = :expected`; ConditionalCheckFailedException is TenantVersionConflictError.
 *   After a successful put it bumps the generation counter (pk `meta`, sk `tenants-generation`,
 *   UpdateItem ADD).
 * - `watch` polls that one counter item each interval and re-lists only when it moved, plus a
 *   full re-list every FULL_RELIST_MS in case a writer died between its put and its bump or the
 *   table was edited by hand. A change is seen within the interval plus one read round (the
 *   counter, then the list).
 */
import {
  type AttributeValue,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  type QueryCommandOutput,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";
import { createDynamoClient, type DynamoClientOptions } from "../../registry/dynamo/client.js";
import { describeDynamoError, isConditionFailed } from "../../registry/dynamo/errors.js";
import {
  TenantStoreCorruptError,
  TenantStoreUnavailableError,
  TenantVersionConflictError,
} from "../errors.js";
import { MAX_RECORD_BYTES } from "../limits.js";
import type { TenantRecord } from "../model.js";
import { PollingTenantWatch } from "../polling-watch.js";
import { decodeTenantRecord, encodeTenantRecord } from "../record-codec.js";
import type { TenantListing, TenantStore, TenantWatch, WatchOptions } from "../store.js";
import { checkTenantId, isValidTenantId } from "../tenant-id.js";

const TENANTS_PK = "tenants";
const GENERATION_KEY = { pk: { S: "meta" }, sk: { S: "tenants-generation" } };

/**
 * How often a watch re-lists even though the generation did not move: the bound on how long a
 * write whose bump was lost (its writer died in between) or a hand edit stays unseen.
 */
export const FULL_RELIST_MS = 60_000;

export interface DynamoTenantStoreOptions {
  tableName: string;
  /** A client to use (not destroyed by close()); default: one from `clientOptions`. */
  client?: DynamoDBClient;
  clientOptions?: DynamoClientOptions;
  /** Default FULL_RELIST_MS; tests shorten it. */
  fullRelistMs?: number;
}

export function openDynamoTenantStore(options: DynamoTenantStoreOptions): TenantStore {
  return new DynamoTenantStore(options);
}

class DynamoTenantStore implements TenantStore {
  private readonly client: DynamoDBClient;
  private readonly ownsClient: boolean;
  private readonly table: string;
  private readonly fullRelistMs: number;

  constructor(options: DynamoTenantStoreOptions) {
    this.table = options.tableName;
    this.client = options.client ?? createDynamoClient(options.clientOptions);
    this.ownsClient = options.client === undefined;
    this.fullRelistMs = options.fullRelistMs ?? FULL_RELIST_MS;
  }

  async get(id: string): Promise<TenantRecord | undefined> {
    const checked = checkTenantId(id);
    const out = await this.send(`cannot read tenant ${checked}`, () =>
      this.client.send(
        new GetItemCommand({ TableName: this.table, Key: tenantKey(checked), ConsistentRead: true }),
      ),
    );
    return out.Item ? decodeItem(out.Item, checked) : undefined;
  }

  async list(): Promise<TenantListing> {
    const tenants: TenantRecord[] = [];
    const unreadable: TenantStoreCorruptError[] = [];
    let start: Record<string, AttributeValue> | undefined;
    do {
      const page: QueryCommandOutput = await this.send("cannot list tenants", () =>
        this.client.send(
          new QueryCommand({
            TableName: this.table,
            KeyConditionExpression: "pk = :pk",
            ExpressionAttributeValues: { ":pk": { S: TENANTS_PK } },
            ConsistentRead: true,
            ExclusiveStartKey: start,
          }),
        ),
      );
      for (const item of page.Items ?? []) {
        const id = item.sk?.S ?? "";
        // Not a tenant id: not a record (nothing we write), and not worth a report naming it.
        if (!isValidTenantId(id)) continue;
        try {
          tenants.push(decodeItem(item, id));
        } catch (err) {
          if (!(err instanceof TenantStoreCorruptError)) throw err;
          unreadable.push(err);
        }
      }
      start = page.LastEvaluatedKey;
    } while (start);
    // Query returns the partition sorted by sk, which is the id: already in order.
    return { tenants, unreadable };
  }

  async put(next: TenantRecord): Promise<void> {
    const id = checkTenantId(next.id);
    const text = encodeTenantRecord(next);
    const expected = next.version - 1;
    // A corrupt current record throws here: its version is unknown, so nothing may replace it
    // until an operator has looked (docs/TENANCY.md). The condition below covers the race.
    const current = await this.get(id);
    if ((current?.version ?? 0) !== expected) throw new TenantVersionConflictError(id, expected);
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.table,
          Item: { ...tenantKey(id), record: { S: text }, version: { N: String(next.version) } },
          ...(expected === 0
            ? { ConditionExpression: "attribute_not_exists(pk)" }
            : {
                ConditionExpression: "version = :expected",
                ExpressionAttributeValues: { ":expected": { N: String(expected) } },
              }),
        }),
      );
    } catch (err) {
      if (isConditionFailed(err)) throw new TenantVersionConflictError(id, expected);
      throw new TenantStoreUnavailableError(`cannot write tenant ${id}: ${describeDynamoError(err)}`, {
        cause: err,
      });
    }
    // The write stands whatever happens next; a lost bump only delays watchers to their next
    // full re-list, so it is not the writer's failure.
    await this.client
      .send(
        new UpdateItemCommand({
          TableName: this.table,
          Key: GENERATION_KEY,
          UpdateExpression: "ADD generation :one",
          ExpressionAttributeValues: { ":one": { N: "1" } },
        }),
      )
      .catch(() => {});
  }

  watch(options?: WatchOptions): TenantWatch {
    let last: { generation: string; at: number; listing: TenantListing } | undefined;
    return new PollingTenantWatch(async () => {
      // Read the counter before listing: a write that bumps it after our read is listed now or
      // seen moving at the next poll.
      const generation = await this.generation();
      if (last && last.generation === generation && Date.now() - last.at < this.fullRelistMs) {
        return last.listing;
      }
      const listing = await this.list();
      last = { generation, at: Date.now(), listing };
      return listing;
    }, options);
  }

  async close(): Promise<void> {
    if (this.ownsClient) this.client.destroy();
  }

  /** The counter's value ("0" before the first bump); one strongly consistent GetItem. */
  private async generation(): Promise<string> {
    const out = await this.send("cannot read the tenants' generation", () =>
      this.client.send(
        new GetItemCommand({ TableName: this.table, Key: GENERATION_KEY, ConsistentRead: true }),
      ),
    );
    return out.Item?.generation?.N ?? "0";
  }

  private async send<T>(what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw new TenantStoreUnavailableError(`${what}: ${describeDynamoError(err)}`, { cause: err });
    }
  }
}

function tenantKey(id: string): Record<string, AttributeValue> {
  return { pk: { S: TENANTS_PK }, sk: { S: id } };
}

/** The record of an item, checked against the item's own version. */
function decodeItem(item: Record<string, AttributeValue>, id: string): TenantRecord {
  const location = `${TENANTS_PK}/${id}`;
  const text = item.record?.S;
  if (typeof text !== "string") {
    throw new TenantStoreCorruptError(location, "has no record text", { tenantId: id });
  }
  if (Buffer.byteLength(text) > MAX_RECORD_BYTES) {
    throw new TenantStoreCorruptError(location, `larger than ${MAX_RECORD_BYTES} bytes`, { tenantId: id });
  }
  const record = decodeTenantRecord(text, { location, tenantId: id });
  if (item.version?.N !== String(record.version)) {
    throw new TenantStoreCorruptError(location, "its version attribute does not match the record", {
      tenantId: id,
    });
  }
  return record;
}
