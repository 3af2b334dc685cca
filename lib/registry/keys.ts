/**
 * The ids the registry keys items by, and how they are checked. DynamoDB keys are built by
 * joining ids with `#` (dynamo/items.ts), so nothing that reaches a key may contain one: tenant
 * and instance ids are checked against patterns without it, and agent ids, which come from the
 * agent's metadata, are escaped. A forged id therefore can never name another tenant's row.
 */
import { InvalidRegistryInputError } from "./errors.js";
import type { LeaseWrite, OwnerRow } from "./model.js";

/** A tenant id (lib/tenancy/tenant-id.ts: a DNS label) or the drop-in mode's `default`. */
const TENANT = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
/**
 * Instance ids are ours (`--server-id` or generated): letters, digits and `._:-`, up to 128
 * characters, so that `instanceId#agent` stays far below DynamoDB's 1,024-byte sort key.
 */
const INSTANCE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** Agent ids are the agent's `agentID` metadata: at most 253 characters, nothing invisible. */
const MAX_AGENT_ID_LENGTH = 253;
const CONTROL = /[\p{Cc}\u2028\u2029]/u;
/** host:port of a peer listener; bounded, printable. */
const PEER_ADDRESS = /^[A-Za-z0-9.:[\]-]{1,253}:\d{1,5}$/;

export function checkTenant(tenant: string): string {
  if (typeof tenant !== "string" || !TENANT.test(tenant)) throw bad("tenant id", tenant);
  return tenant;
}

export function checkInstanceId(id: string): string {
  if (typeof id !== "string" || !INSTANCE.test(id)) throw bad("instance id", id);
  return id;
}

export function checkAgentId(id: string): string {
  if (typeof id !== "string" || id.length === 0 || id.length > MAX_AGENT_ID_LENGTH || CONTROL.test(id)) {
    throw bad("agent id", id);
  }
  return id;
}

export function checkPeerAddress(address: string): string {
  if (typeof address !== "string" || !PEER_ADDRESS.test(address)) throw bad("peer address", address);
  return address;
}

/** Incarnations, sessions and times: non-negative safe integers (they are DynamoDB numbers). */
export function checkCounter(what: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 0)
    throw new InvalidRegistryInputError(`${what} must be a non-negative integer`);
  return n;
}

/** `%` and `#` escaped, so the escaped id has no `#` and unescapes to exactly one id. */
export function escapeKeyPart(s: string): string {
  return s.replace(/%/g, "%25").replace(/#/g, "%23");
}

export function unescapeKeyPart(s: string): string {
  return s.replace(/%23/g, "#").replace(/%25/g, "%");
}

function bad(what: string, value: unknown): InvalidRegistryInputError {
  // Never echo the value itself: it may be long or hostile. Its length is enough to debug.
  const len = typeof value === "string" ? `${value.length} characters` : typeof value;
  return new InvalidRegistryInputError(`not a valid ${what} (${len})`);
}

/** Every field of a lease about to be written. */
export function checkLease(lease: LeaseWrite): void {
  checkInstanceId(lease.instanceId);
  checkPeerAddress(lease.peerAddress);
  checkCounter("incarnation", lease.incarnation);
  checkCounter("heartbeatAt", lease.heartbeatAt);
  checkCounter("expiresAt", lease.expiresAt);
  checkCounter("agents", lease.agents);
}

/** Every field of a row about to be written. */
export function checkRow(row: OwnerRow): void {
  checkTenant(row.tenant);
  checkAgentId(row.agentId);
  checkInstanceId(row.instanceId);
  checkCounter("incarnation", row.incarnation);
  checkCounter("session", row.session);
  checkCounter("connectedAt", row.connectedAt);
}
