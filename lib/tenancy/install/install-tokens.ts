/**
 * Install tokens: the secret in the one-line agent install,
 * `kubectl apply -f https://<gateway>/v1/install/<token>.yaml`. Pure functions from one record
 * to the next, like operations.ts; the store operation that spends one is redeem.ts.
 *
 * The token is `kgw_install_<tenant>_<tokenId>_<secret>` (lib/tenancy/tokens.ts): its kind is in
 * its text, so it is refused as `wrong-role` wherever an agent or caller token is expected, and
 * an agent or caller token is refused here the same way. It is stored as SHA-256 only, like
 * every token, and it always expires.
 */
import { InvalidTenantInputError } from "../errors.js";
import { MAX_CREDENTIALS_PER_KIND } from "../limits.js";
import type { InstallToken, TenantRecord } from "../model.js";
import { findCredential, pruneInactive, requireActive } from "../operations.js";
import { hashToken, parseToken, tokenMatchesHash } from "../tokens.js";
import { InstallTokenRefusedError } from "./errors.js";

/** A day: long enough to paste the line into another team's terminal, short enough to forget. */
export const DEFAULT_INSTALL_TOKEN_TTL_MS = 24 * 3_600_000;
/** A link good for longer than a month is a standing credential; rotate agent tokens instead. */
export const MAX_INSTALL_TOKEN_TTL_MS = 30 * 24 * 3_600_000;
/** Anything shorter expires before kubectl has connected. */
export const MIN_INSTALL_TOKEN_TTL_MS = 1_000;

/** What `kgw tenant show` prints; what the route enforces (one function decides both). */
export type InstallTokenStatus = "active" | "expired" | "used" | "revoked";

export function installTokenStatus(token: InstallToken, now: Date): InstallTokenStatus {
  if (token.revokedAt !== null) return "revoked";
  if (token.singleUse && token.usedAt !== null) return "used";
  return now.getTime() < Date.parse(token.expiresAt) ? "active" : "expired";
}

/** When the token stopped being usable (for pruning), or null while it is usable. */
function inactiveSince(token: InstallToken, now: Date): number | null {
  switch (installTokenStatus(token, now)) {
    case "active":
      return null;
    case "revoked":
      return Date.parse(token.revokedAt!);
    case "used":
      return Date.parse(token.usedAt!);
    case "expired":
      return Date.parse(token.expiresAt);
  }
}

export interface InstallTokenOptions {
  ttlMs: number;
  singleUse: boolean;
}

export function checkInstallTokenTtl(ms: number): number {
  if (!Number.isFinite(ms) || ms < MIN_INSTALL_TOKEN_TTL_MS || ms > MAX_INSTALL_TOKEN_TTL_MS) {
    throw new InvalidTenantInputError(
      `an install token's lifetime must be between 1s and ${MAX_INSTALL_TOKEN_TTL_MS / 86_400_000} days`,
    );
  }
  return ms;
}

/**
 * Lists a new install token (its hash) in the record. Inactive ones are forgotten after the
 * retention, and the longest-inactive first when the list is full, as for credentials; with 32
 * usable ones, issuing is refused until some are revoked.
 */
export function addInstallToken(
  record: TenantRecord,
  token: { id: string; sha256: string },
  options: InstallTokenOptions,
  now: Date,
): TenantRecord {
  const active = requireActive(record, record.id);
  const ttl = checkInstallTokenTtl(options.ttlMs);
  if (findCredential(active, token.id) || active.installTokens.some((t) => t.id === token.id)) {
    throw new InvalidTenantInputError(`credential id ${token.id} is already in use in tenant ${record.id}`);
  }
  const list = pruneInactive(active.installTokens, now, inactiveSince);
  if (list.length >= MAX_CREDENTIALS_PER_KIND) {
    throw new InvalidTenantInputError(
      `tenant ${record.id} already has ${MAX_CREDENTIALS_PER_KIND} usable install tokens; revoke some first`,
    );
  }
  const at = now.toISOString();
  const created: InstallToken = {
    id: token.id,
    sha256: token.sha256,
    createdAt: at,
    expiresAt: new Date(now.getTime() + ttl).toISOString(),
    revokedAt: null,
    singleUse: options.singleUse,
    usedAt: null,
  };
  return { ...active, installTokens: [...list, created], updatedAt: at };
}

/**
 * Checks a presented install token against its tenant's record (undefined: no such tenant) and
 * returns the listed token; throws InstallTokenRefusedError. The same steps whatever is wrong:
 * the token is hashed even when its tenant or id is unknown, and compared in constant time, so
 * how long a refusal takes says nothing about which tenants or token ids exist.
 */
export function checkInstallToken(record: TenantRecord | undefined, token: string, now: Date): InstallToken {
  const parsed = parseToken(token);
  if (parsed?.kind !== "install") throw new InstallTokenRefusedError("malformed");
  const listed =
    record && record.id === parsed.tenantId && record.state === "active"
      ? record.installTokens.find((t) => t.id === parsed.tokenId)
      : undefined;
  if (!listed) {
    hashToken(token);
    throw new InstallTokenRefusedError("unknown", parsed.tokenId);
  }
  if (!tokenMatchesHash(token, listed.sha256)) throw new InstallTokenRefusedError("unknown", parsed.tokenId);
  const status = installTokenStatus(listed, now);
  if (status !== "active") throw new InstallTokenRefusedError(status, parsed.tokenId);
  return listed;
}

/** The record with `tokenId` marked used at `now` (a single-use token is spent by this). */
export function markInstallTokenUsed(record: TenantRecord, tokenId: string, now: Date): TenantRecord {
  const at = now.toISOString();
  return {
    ...record,
    installTokens: record.installTokens.map((t) => (t.id === tokenId ? { ...t, usedAt: at } : t)),
    updatedAt: at,
  };
}
