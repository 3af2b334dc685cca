/**
 * The stored form of a tenant record, for every store: JSON with a schema number and exactly the
 * fields of `TenantRecord`. Parsing is strict (unknown fields, wrong types, oversized text or too
 * many credentials are refused) because a record decides who reaches a cluster: anything the
 * parser is unsure of must fail closed, with an error that says where, not what the bytes were.
 * The one leniency is for lists added to the model later (ADDED_LISTS): absent reads as empty.
 */
import { DEFAULT_EGRESS_POLICY, type EgressPolicy, validateEgressPolicy } from "../egress/egress-policy.js";
import { InvalidTenantInputError, TenantStoreCorruptError } from "./errors.js";
import { MAX_CREDENTIALS_PER_KIND, MAX_DISPLAY_NAME_LENGTH, MAX_RECORD_BYTES } from "./limits.js";
import type {
  CertificateCredential,
  CredentialRole,
  InstallToken,
  TenantRecord,
  TenantState,
  TokenCredential,
} from "./model.js";
import { validateQuotas } from "./quotas.js";
import { isValidTenantId } from "./tenant-id.js";
import { normalizeSerial, parseTenantUri } from "./tenant-uri.js";
import { TOKEN_ID_PATTERN } from "./tokens.js";

/** Bumped when the stored shape changes incompatibly; a reader refuses schemas it does not know. */
export const RECORD_SCHEMA = 1;

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const SHA256_HEX = /^[0-9a-f]{64}$/;
/** Subjects are short (our issuer writes "O=…, CN=<tenant>"); 512 leaves room for a custom CA. */
const MAX_SUBJECT_LENGTH = 512;
const STATES: readonly TenantState[] = ["active", "deleted"];

/** The credential lists of a record, and what each holds: tokens, or certificates of a role. */
const CREDENTIAL_LISTS = [
  ["agentTokens", "token"],
  ["agentCertificates", "agent"],
  ["callerTokens", "token"],
  ["callerCertificates", "caller"],
  ["installTokens", "install"],
] as const satisfies readonly (readonly [keyof TenantRecord, "token" | "install" | CredentialRole])[];

/**
 * Lists added after schema 1 was first written: a stored record may lack them (it was written
 * before they existed) and then reads as if they were empty. They are written only when not
 * empty, so a gateway of the previous version, which refuses unknown fields, still reads every
 * record that does not use them (a rolling upgrade or a rollback keeps working).
 */
const ADDED_LISTS = ["agentCertificates", "installTokens"] as const satisfies readonly (keyof TenantRecord)[];

/** The egress policy came later too: absent reads as the default, and the default is not written. */
function isDefaultEgress(p: EgressPolicy): boolean {
  const d = DEFAULT_EGRESS_POLICY;
  return (
    p.allowLoopback === d.allowLoopback &&
    p.allowLinkLocal === d.allowLinkLocal &&
    p.allow.length === d.allow.length &&
    p.allow.every((r, i) => r === d.allow[i])
  );
}

/** Serializes a record for storage; refuses (as bad input) one larger than MAX_RECORD_BYTES. */
export function encodeTenantRecord(record: TenantRecord): string {
  // Validate what we are about to write with the same rules a reader applies: a record that could
  // not be read back must not be written.
  const problem = recordProblem(record);
  if (problem) throw new InvalidTenantInputError(`tenant record ${record.id}: ${problem}`);
  const stored: Record<string, unknown> = { schema: RECORD_SCHEMA, ...record };
  for (const key of ADDED_LISTS) if (record[key].length === 0) delete stored[key];
  if (isDefaultEgress(record.egress)) delete stored.egress;
  if (Object.keys(record.quotas).length === 0) delete stored.quotas;
  const text = `${JSON.stringify(stored, null, 2)}\n`;
  if (Buffer.byteLength(text) > MAX_RECORD_BYTES) {
    throw new InvalidTenantInputError(`tenant record ${record.id} would exceed ${MAX_RECORD_BYTES} bytes`);
  }
  return text;
}

/** Where stored bytes came from: the file or item, and the tenant id its key names. */
export interface RecordSource {
  readonly location: string;
  readonly tenantId: string;
}

/**
 * Parses stored bytes into a frozen record. The size is checked before parsing, so a huge value
 * costs no more than reading the limit; the id inside must be the one the key names (a record
 * copied to another tenant's place is corrupt, not a second tenant).
 */
export function decodeTenantRecord(text: string, source: RecordSource): TenantRecord {
  const corrupt = (reason: string, cause?: unknown) =>
    new TenantStoreCorruptError(source.location, reason, { tenantId: source.tenantId, cause });
  if (Buffer.byteLength(text) > MAX_RECORD_BYTES) throw corrupt(`larger than ${MAX_RECORD_BYTES} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw corrupt("not valid JSON", err);
  }
  if (!isObject(value)) throw corrupt("not a JSON object");
  if (value.schema !== RECORD_SCHEMA)
    throw corrupt(`unknown schema (this version reads schema ${RECORD_SCHEMA})`);
  const { schema: _schema, ...rest } = value;
  for (const key of ADDED_LISTS) if (!Object.hasOwn(rest, key)) rest[key] = [];
  if (!Object.hasOwn(rest, "egress")) rest.egress = DEFAULT_EGRESS_POLICY;
  if (!Object.hasOwn(rest, "quotas")) rest.quotas = {};
  const problem = recordProblem(rest);
  if (problem) throw corrupt(problem);
  if (rest.id !== source.tenantId) throw corrupt("the record's id is not the tenant its location names");
  return deepFreeze(rest as unknown as TenantRecord);
}

/** What is wrong with a would-be record, or undefined. Checks everything a reader relies on. */
function recordProblem(r: unknown): string | undefined {
  if (!isObject(r)) return "not an object";
  const extra = extraKeys(r, [
    "id",
    "version",
    "displayName",
    "state",
    "createdAt",
    "updatedAt",
    ...CREDENTIAL_LISTS.map(([key]) => key),
    "egress",
    "quotas",
  ]);
  if (extra) return extra;
  if (!isValidTenantId(r.id)) return "invalid id";
  if (!Number.isSafeInteger(r.version) || (r.version as number) < 1) return "invalid version";
  if (!isText(r.displayName, MAX_DISPLAY_NAME_LENGTH)) return "invalid displayName";
  if (!STATES.includes(r.state as TenantState)) return "invalid state";
  if (!isTime(r.createdAt) || !isTime(r.updatedAt)) return "invalid createdAt/updatedAt";
  const egress = egressProblem(r.egress);
  if (egress) return egress;
  try {
    validateQuotas(r.quotas);
  } catch (err) {
    return (err as Error).message;
  }
  // Ids are unique in the whole record, not only in their list: `revoke` takes an id alone.
  const ids = new Set<string>();
  for (const [key, holds] of CREDENTIAL_LISTS) {
    const list = r[key];
    if (!Array.isArray(list)) return `${key} is not a list`;
    if (list.length > MAX_CREDENTIALS_PER_KIND)
      return `${key} has more than ${MAX_CREDENTIALS_PER_KIND} entries`;
    if (r.state === "deleted" && list.length > 0) return `a deleted tenant lists ${key}`;
    for (const [i, c] of list.entries()) {
      const p =
        holds === "token"
          ? tokenProblem(c)
          : holds === "install"
            ? installTokenProblem(c)
            : certificateProblem(c, r.id as string, holds);
      if (p) return `${key}[${i}]: ${p}`;
      const id = (c as { id: string }).id;
      if (ids.has(id)) return `${key}[${i}]: duplicate id`;
      ids.add(id);
    }
  }
  return undefined;
}

/** Only canonical policies are stored, so a reader never has to guess what a rule meant. */
function egressProblem(e: unknown): string | undefined {
  if (!isObject(e)) return "egress is not an object";
  const extra = extraKeys(e, ["allow", "allowLoopback", "allowLinkLocal"]);
  if (extra) return `egress: ${extra}`;
  let canonical: EgressPolicy;
  try {
    canonical = validateEgressPolicy(e as unknown as EgressPolicy);
  } catch (err) {
    return (err as Error).message;
  }
  const given = e.allow as string[];
  if (canonical.allow.length !== given.length || canonical.allow.some((r, i) => r !== given[i]))
    return "egress: rules not in canonical form";
  return undefined;
}

function credentialBaseProblem(c: Record<string, unknown>): string | undefined {
  if (!isTime(c.createdAt)) return "invalid createdAt";
  if (c.expiresAt !== null && !isTime(c.expiresAt)) return "invalid expiresAt";
  if (c.revokedAt !== null && !isTime(c.revokedAt)) return "invalid revokedAt";
  return undefined;
}

const TOKEN_KEYS = [
  "id",
  "sha256",
  "createdAt",
  "expiresAt",
  "revokedAt",
] satisfies (keyof TokenCredential)[];

/** What every stored token has: exactly `keys`, a token id and the hex SHA-256 of the token. */
function hashedTokenProblem(c: unknown, keys: readonly string[]): string | undefined {
  if (!isObject(c)) return "not an object";
  const extra = extraKeys(c, keys);
  if (extra) return extra;
  if (typeof c.id !== "string" || !TOKEN_ID_PATTERN.test(c.id)) return "invalid id";
  if (typeof c.sha256 !== "string" || !SHA256_HEX.test(c.sha256)) return "invalid sha256";
  return undefined;
}

function tokenProblem(c: unknown): string | undefined {
  return hashedTokenProblem(c, TOKEN_KEYS) ?? credentialBaseProblem(c as Record<string, unknown>);
}

/** An install token always has an end, and says whether it is spent by its first fetch. */
function installTokenProblem(c: unknown): string | undefined {
  const problem = hashedTokenProblem(c, [
    ...TOKEN_KEYS,
    "singleUse",
    "usedAt",
  ] satisfies (keyof InstallToken)[]);
  if (problem) return problem;
  if (!isObject(c)) return "not an object";
  if (!isTime(c.expiresAt)) return "invalid expiresAt (an install token always expires)";
  if (typeof c.singleUse !== "boolean") return "invalid singleUse";
  if (c.usedAt !== null && !isTime(c.usedAt)) return "invalid usedAt";
  return credentialBaseProblem(c);
}

function certificateProblem(c: unknown, tenantId: string, role: CredentialRole): string | undefined {
  if (!isObject(c)) return "not an object";
  const extra = extraKeys(c, [
    "id",
    "subject",
    "uri",
    "notAfter",
    "createdAt",
    "expiresAt",
    "revokedAt",
  ] satisfies (keyof CertificateCredential)[]);
  if (extra) return extra;
  if (typeof c.id !== "string" || normalizeSerial(c.id) !== c.id) return "invalid id (serial)";
  if (!isText(c.subject, MAX_SUBJECT_LENGTH)) return "invalid subject";
  const identity = typeof c.uri === "string" ? parseTenantUri(c.uri) : undefined;
  if (identity?.tenantId !== tenantId) return "uri does not name this tenant";
  // A certificate in the other role's list would be unusable (authentication looks in the list
  // of the role its URI names), but a record that says so was not written by us.
  if (identity.role !== role) return `uri names the ${identity.role} role, not ${role}`;
  if (!isTime(c.notAfter)) return "invalid notAfter";
  return credentialBaseProblem(c);
}

function extraKeys(o: Record<string, unknown>, allowed: readonly string[]): string | undefined {
  for (const key of allowed) if (!Object.hasOwn(o, key)) return `missing field ${key}`;
  const extra = Object.keys(o).filter((k) => !allowed.includes(k));
  return extra.length > 0 ? `unknown field ${JSON.stringify(extra[0]!.slice(0, 40))}` : undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isTime(v: unknown): v is string {
  return typeof v === "string" && ISO_UTC.test(v) && !Number.isNaN(Date.parse(v));
}

/** Printable text only: a record is printed by `kgw tenant list`, so no terminal control codes. */
export function isText(v: unknown, maxLength: number): v is string {
  return typeof v === "string" && v.length <= maxLength && !/[\p{Cc}\u2028\u2029]/u.test(v);
}

/** Freezes a record and everything in it: snapshots handed out by a store cannot be changed. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
