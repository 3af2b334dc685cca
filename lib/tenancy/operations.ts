/**
 * Tenant operations as pure functions from one record to the next: no I/O, no clock of their
 * own, so every rule (grace, revocation, limits, pruning) is tested without a store, and every
 * store applies them the same way (read, transform, conditional write; see mutate.ts).
 *
 * Versions are the write's business: these keep the version of the record they start from
 * (a new tenant starts from its tombstone's, or 0), and `updateTenant` writes the result as the
 * next version. So several operations compose into one write: create plus its first token.
 */
import {
  DEFAULT_EGRESS_POLICY,
  type EgressPolicy,
  EgressRuleError,
  validateEgressPolicy,
} from "../egress/egress-policy.js";
import { inactiveSince, isUsable } from "./credential-status.js";
import {
  CredentialAlreadyRevokedError,
  InvalidTenantInputError,
  TenantExistsError,
  TenantNotFoundError,
} from "./errors.js";
import {
  INACTIVE_CREDENTIAL_RETENTION_MS,
  MAX_CREDENTIALS_PER_KIND,
  MAX_DISPLAY_NAME_LENGTH,
  MAX_ROTATION_GRACE_MS,
} from "./limits.js";
import {
  type AnyCredential,
  type CertificateCredential,
  CREDENTIAL_KINDS,
  type CredentialKind,
  credentialsOf,
  type TenantRecord,
  type TokenCredential,
} from "./model.js";
import { type QuotaName, validateQuotas } from "./quotas.js";
import { isText } from "./record-codec.js";
import { checkTenantId, preview } from "./tenant-id.js";

export interface NewTenant {
  id: string;
  /** Defaults to the id. */
  displayName?: string;
}

/**
 * The first record of a tenant. `previous` is what the store holds for the id: nothing, or a
 * tombstone whose version the new record continues from (versions never go back, so a watcher
 * holding the old tenant's last version cannot mistake the new one for something older).
 */
export function createTenantRecord(
  input: NewTenant,
  previous: TenantRecord | undefined,
  now: Date,
): TenantRecord {
  const id = checkTenantId(input.id);
  if (previous && previous.state !== "deleted") throw new TenantExistsError(id);
  const at = now.toISOString();
  return {
    id,
    version: previous?.version ?? 0,
    displayName: checkDisplayName(input.displayName ?? id),
    state: "active",
    createdAt: at,
    updatedAt: at,
    agentTokens: [],
    agentCertificates: [],
    callerTokens: [],
    callerCertificates: [],
    installTokens: [],
    egress: DEFAULT_EGRESS_POLICY,
    quotas: {},
  };
}

/** The record of an existing, not deleted, tenant; refuses anything else. */
export function requireActive(record: TenantRecord | undefined, id: string): TenantRecord {
  if (!record || record.state === "deleted") throw new TenantNotFoundError(`tenant ${id}`);
  return record;
}

export interface AddOptions {
  /**
   * Rotate: credentials of the same kind that are usable now stay usable only for this long
   * (their expiresAt becomes at most now + grace). Absent: they are left alone (an extra
   * credential, e.g. a second caller bundle).
   */
  rotateGraceMs?: number;
}

export function addToken(
  record: TenantRecord,
  kind: "agent-token" | "caller-token",
  token: { id: string; sha256: string },
  now: Date,
  options: AddOptions = {},
): TenantRecord {
  const credential: TokenCredential = {
    id: token.id,
    sha256: token.sha256,
    createdAt: now.toISOString(),
    expiresAt: null,
    revokedAt: null,
  };
  return addCredential(record, kind, credential, now, options);
}

/** What the record keeps of an issued certificate: public facts, never the key. */
export interface NewCertificate {
  /** Lower-case hex without leading zeros (normalizeSerial). */
  serial: string;
  subject: string;
  /** The URI SAN; the store refuses one that does not name this tenant and the kind's role. */
  uri: string;
  notAfter: Date;
}

export function addCertificate(
  record: TenantRecord,
  kind: "agent-certificate" | "caller-certificate",
  certificate: NewCertificate,
  now: Date,
  options: AddOptions = {},
): TenantRecord {
  const credential: CertificateCredential = {
    id: certificate.serial,
    subject: certificate.subject,
    uri: certificate.uri,
    notAfter: certificate.notAfter.toISOString(),
    createdAt: now.toISOString(),
    expiresAt: null,
    revokedAt: null,
  };
  return addCredential(record, kind, credential, now, options);
}

export const addCallerCertificate = (
  record: TenantRecord,
  certificate: NewCertificate,
  now: Date,
  options: AddOptions = {},
): TenantRecord => addCertificate(record, "caller-certificate", certificate, now, options);

export const addAgentCertificate = (
  record: TenantRecord,
  certificate: NewCertificate,
  now: Date,
  options: AddOptions = {},
): TenantRecord => addCertificate(record, "agent-certificate", certificate, now, options);

function addCredential(
  record: TenantRecord,
  kind: CredentialKind,
  credential: AnyCredential,
  now: Date,
  options: AddOptions,
): TenantRecord {
  const active = requireActive(record, record.id);
  if (findCredential(active, credential.id) || active.installTokens.some((t) => t.id === credential.id)) {
    // 64 random bits (tokens) or 126 (serials): a repeat means a broken random source, not bad luck.
    throw new InvalidTenantInputError(
      `credential id ${credential.id} is already in use in tenant ${record.id}`,
    );
  }
  let list = [...credentialsOf(active, kind)];
  if (options.rotateGraceMs !== undefined) {
    const until = now.getTime() + checkGrace(options.rotateGraceMs);
    list = list.map((c) => (isUsable(c, now) ? withExpiry(c, until) : c));
  }
  list = pruneInactive(list, now, inactiveSince);
  if (list.length >= MAX_CREDENTIALS_PER_KIND) {
    throw new InvalidTenantInputError(
      `tenant ${record.id} already has ${MAX_CREDENTIALS_PER_KIND} usable ${kind}s; revoke some first`,
    );
  }
  return next(active, now, { [listKey(kind)]: [...list, credential] });
}

/** Refuses the credential from now on, whatever its grace. Revoking twice is refused too. */
export function revokeCredential(record: TenantRecord, credentialId: string, now: Date): TenantRecord {
  const active = requireActive(record, record.id);
  const found = findCredential(active, credentialId);
  // Install tokens are not a CredentialKind (they authenticate no peer) but revoke the same way.
  const install = found ? undefined : active.installTokens.find((t) => t.id === credentialId);
  if (install) {
    if (install.revokedAt !== null) {
      throw new CredentialAlreadyRevokedError(credentialId);
    }
    const at = now.toISOString();
    return next(active, now, {
      installTokens: active.installTokens.map((t) => (t.id === credentialId ? { ...t, revokedAt: at } : t)),
    });
  }
  if (!found) throw new TenantNotFoundError(`credential ${preview(credentialId)} of tenant ${record.id}`);
  if (found.credential.revokedAt !== null) {
    throw new CredentialAlreadyRevokedError(credentialId);
  }
  const at = now.toISOString();
  const list = credentialsOf(active, found.kind).map((c) =>
    c.id === credentialId ? { ...c, revokedAt: at } : c,
  );
  return next(active, now, { [listKey(found.kind)]: list });
}

/** The tombstone of a tenant: no credentials, so nothing of it authenticates any more. */
export function deleteTenantRecord(record: TenantRecord, now: Date): TenantRecord {
  const active = requireActive(record, record.id);
  return next(active, now, {
    state: "deleted",
    agentTokens: [],
    agentCertificates: [],
    callerTokens: [],
    callerCertificates: [],
    installTokens: [],
    egress: DEFAULT_EGRESS_POLICY,
    quotas: {},
  });
}

/**
 * Changes the tenant's quota overrides: a number sets one, null drops it (back to the server's
 * default). Throws InvalidTenantInputError for a value out of bounds.
 */
export function setQuotas(
  record: TenantRecord,
  changes: Readonly<Partial<Record<QuotaName, number | null>>>,
  now: Date,
): TenantRecord {
  const active = requireActive(record, record.id);
  const next_: Record<string, number> = { ...active.quotas };
  for (const [name, value] of Object.entries(changes)) {
    if (value === null) delete next_[name];
    else if (value !== undefined) next_[name] = value;
  }
  return next(active, now, { quotas: validateQuotas(next_) });
}

/**
 * Replaces the tenant's egress policy; the rules are checked and stored in canonical form
 * (throws InvalidTenantInputError naming the bad rule).
 */
export function setEgressPolicy(record: TenantRecord, policy: EgressPolicy, now: Date): TenantRecord {
  const active = requireActive(record, record.id);
  let egress: EgressPolicy;
  try {
    egress = validateEgressPolicy(policy);
  } catch (err) {
    if (err instanceof EgressRuleError) throw new InvalidTenantInputError(err.message);
    throw err;
  }
  return next(active, now, { egress });
}

export function findCredential(
  record: TenantRecord,
  credentialId: string,
): { kind: CredentialKind; credential: AnyCredential } | undefined {
  for (const kind of CREDENTIAL_KINDS) {
    const credential = credentialsOf(record, kind).find((c) => c.id === credentialId);
    if (credential) return { kind, credential };
  }
  return undefined;
}

export function checkDisplayName(name: string): string {
  if (!isText(name, MAX_DISPLAY_NAME_LENGTH)) {
    throw new InvalidTenantInputError(
      `display name must be at most ${MAX_DISPLAY_NAME_LENGTH} characters without control characters, got ${preview(name)}`,
    );
  }
  return name;
}

export function checkGrace(ms: number): number {
  if (!Number.isFinite(ms) || ms < 0 || ms > MAX_ROTATION_GRACE_MS) {
    throw new InvalidTenantInputError(
      `grace period must be between 0 and ${MAX_ROTATION_GRACE_MS / 86_400_000} days`,
    );
  }
  return ms;
}

function withExpiry<T extends AnyCredential>(c: T, until: number): T {
  const current = c.expiresAt === null ? Number.POSITIVE_INFINITY : Date.parse(c.expiresAt);
  return until < current ? { ...c, expiresAt: new Date(until).toISOString() } : c;
}

/**
 * Drops entries inactive for longer than the retention, and then, if the list is full, the
 * longest-inactive ones: forgetting an inactive credential is safe because verification is an
 * allowlist (an unknown id or serial is refused). `since` says when an entry stopped being usable
 * (null: it is usable); credentials and install tokens (install/install-tokens.ts) each have one.
 */
export function pruneInactive<T>(
  list: readonly T[],
  now: Date,
  since: (entry: T, now: Date) => number | null,
): T[] {
  const cutoff = now.getTime() - INACTIVE_CREDENTIAL_RETENTION_MS;
  const kept = list.filter((c) => {
    const at = since(c, now);
    return at === null || at > cutoff;
  });
  const inactive = kept
    .map((c) => ({ c, at: since(c, now) }))
    .filter((x): x is { c: T; at: number } => x.at !== null)
    .sort((a, b) => a.at - b.at);
  const drop = new Set<T>();
  for (const { c } of inactive) {
    if (kept.length - drop.size < MAX_CREDENTIALS_PER_KIND) break;
    drop.add(c);
  }
  return kept.filter((c) => !drop.has(c));
}

function listKey(
  kind: CredentialKind,
): "agentTokens" | "agentCertificates" | "callerTokens" | "callerCertificates" {
  switch (kind) {
    case "agent-token":
      return "agentTokens";
    case "agent-certificate":
      return "agentCertificates";
    case "caller-token":
      return "callerTokens";
    case "caller-certificate":
      return "callerCertificates";
  }
}

function next(record: TenantRecord, now: Date, changes: Partial<TenantRecord>): TenantRecord {
  return { ...record, ...changes, updatedAt: now.toISOString() };
}
