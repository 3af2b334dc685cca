/**
 * Leases and ownership rows as DynamoDB items, both ways. Decoding is strict: an item whose key
 * and attributes disagree, or whose numbers are not numbers, is RegistryCorruptItemError, which
 * listings skip and report (a hand-edited or foreign item never becomes a route).
 */
import type { AttributeValue } from "@aws-sdk/client-dynamodb";
import { LEASE_ITEM_TTL_MS, OWNER_ROW_TTL_MS } from "../durations.js";
import { RegistryCorruptItemError } from "../errors.js";
import {
  checkAgentId,
  checkInstanceId,
  checkPeerAddress,
  checkTenant,
  escapeKeyPart,
  unescapeKeyPart,
} from "../keys.js";
import type { InstanceLease, OwnerRow } from "../model.js";
import { OWNER_INSTANCE_ATTRIBUTE, PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE } from "./table.js";

export type Item = Record<string, AttributeValue>;
export type Key = { [PARTITION_KEY]: AttributeValue; [SORT_KEY]: AttributeValue };

export const INSTANCES_PK = "instances";
const OWNERS_PREFIX = "owners#";

export const s = (v: string): AttributeValue => ({ S: v });
export const n = (v: number): AttributeValue => ({ N: String(v) });
const ttlOf = (ms: number) => n(Math.ceil(ms / 1000));

export function leaseKey(instanceId: string): Key {
  return { pk: s(INSTANCES_PK), sk: s(instanceId) };
}

export const ownersPk = (tenant: string) => `${OWNERS_PREFIX}${tenant}`;

export function ownerKey(r: Pick<OwnerRow, "tenant" | "instanceId" | "agentId">): Key {
  // The instance id has no `#` (keys.ts), and the escaped agent id has none either: the first
  // `#` of the sort key is the separator, whatever the agent called itself.
  return { pk: s(ownersPk(r.tenant)), sk: s(`${r.instanceId}#${escapeKeyPart(r.agentId)}`) };
}

export function leaseItem(l: InstanceLease): Item {
  return {
    ...leaseKey(l.instanceId),
    peerAddress: s(l.peerAddress),
    incarnation: n(l.incarnation),
    heartbeatAt: n(l.heartbeatAt),
    expiresAt: n(l.expiresAt),
    draining: { BOOL: l.draining },
    agents: n(l.agents),
    [TTL_ATTRIBUTE]: ttlOf(l.heartbeatAt + LEASE_ITEM_TTL_MS),
  };
}

export function ownerItem(r: OwnerRow, now: number): Item {
  return {
    ...ownerKey(r),
    tenant: s(r.tenant),
    agentId: s(r.agentId),
    instanceId: s(r.instanceId),
    [OWNER_INSTANCE_ATTRIBUTE]: s(r.instanceId),
    incarnation: n(r.incarnation),
    session: n(r.session),
    connectedAt: n(r.connectedAt),
    [TTL_ATTRIBUTE]: ttlOf(now + OWNER_ROW_TTL_MS),
  };
}

export function decodeLease(item: Item): InstanceLease {
  const where = location(item);
  const f = fields(item, where);
  if (f.str(PARTITION_KEY) !== INSTANCES_PK) throw new RegistryCorruptItemError(where, "not a lease");
  const instanceId = f.checked("instance id", () => checkInstanceId(f.str(SORT_KEY)));
  return Object.freeze({
    instanceId,
    peerAddress: f.checked("peer address", () => checkPeerAddress(f.str("peerAddress"))),
    incarnation: f.num("incarnation"),
    heartbeatAt: f.num("heartbeatAt"),
    expiresAt: f.num("expiresAt"),
    draining: f.bool("draining"),
    agents: f.num("agents"),
  });
}

/** Decodes a row from the table or from the index (which projects all but `instanceId`). */
export function decodeOwner(item: Item): OwnerRow {
  const where = location(item);
  const f = fields(item, where);
  const pk = f.str(PARTITION_KEY);
  const sk = f.str(SORT_KEY);
  const sep = sk.indexOf("#");
  if (!pk.startsWith(OWNERS_PREFIX) || sep < 0)
    throw new RegistryCorruptItemError(where, "not an ownership row");
  const tenant = f.checked("tenant", () => checkTenant(pk.slice(OWNERS_PREFIX.length)));
  const instanceId = f.checked("instance id", () => checkInstanceId(sk.slice(0, sep)));
  const agentId = f.checked("agent id", () => checkAgentId(unescapeKeyPart(sk.slice(sep + 1))));
  // The attributes must say what the key says: a row copied under another key is not a route.
  if (
    f.str("tenant") !== tenant ||
    f.str("agentId") !== agentId ||
    f.str(OWNER_INSTANCE_ATTRIBUTE) !== instanceId ||
    (item.instanceId !== undefined && f.str("instanceId") !== instanceId) ||
    ownerKey({ tenant, instanceId, agentId }).sk.S !== sk
  ) {
    throw new RegistryCorruptItemError(where, "its attributes do not match its key");
  }
  return Object.freeze({
    tenant,
    agentId,
    instanceId,
    incarnation: f.num("incarnation"),
    session: f.num("session"),
    connectedAt: f.num("connectedAt"),
  });
}

/** `pk/sk` of an item, bounded and printable, for error messages. */
function location(item: Item): string {
  const part = (v: AttributeValue | undefined) =>
    (typeof v?.S === "string" ? v.S : "?").slice(0, 200).replace(/[^\x20-\x7e]/g, "?");
  return `${part(item[PARTITION_KEY])}/${part(item[SORT_KEY])}`;
}

function fields(item: Item, where: string) {
  const corrupt = (reason: string) => new RegistryCorruptItemError(where, reason);
  return {
    str(name: string): string {
      const v = item[name]?.S;
      if (typeof v !== "string") throw corrupt(`${name} is not a string`);
      return v;
    },
    num(name: string): number {
      const v = item[name]?.N;
      const x = typeof v === "string" && /^\d{1,16}$/.test(v) ? Number(v) : Number.NaN;
      if (!Number.isSafeInteger(x)) throw corrupt(`${name} is not a non-negative integer`);
      return x;
    },
    bool(name: string): boolean {
      const v = item[name]?.BOOL;
      if (typeof v !== "boolean") throw corrupt(`${name} is not a boolean`);
      return v;
    },
    checked<T>(what: string, fn: () => T): T {
      try {
        return fn();
      } catch {
        throw corrupt(`not a valid ${what}`);
      }
    },
  };
}
