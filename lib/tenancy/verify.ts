/**
 * Checks a presented credential against a tenant's record. Pure and synchronous: the server
 * calls these on a snapshot it already holds (TenantWatch.get), so a handshake does no I/O.
 *
 * Lookup never scans: a token names its tenant and id (tokens.ts), a caller certificate names
 * its tenant in a URI SAN (caller-uri.ts); the record then has the one hash or serial to check.
 * Secrets are compared in constant time and never appear in errors or logs.
 */

import { normalizeSerial, tenantIdFromSubjectAltName } from "./caller-uri.js";
import { credentialStatus } from "./credential-status.js";
import { CredentialRefusedError, type RefusalReason } from "./errors.js";
import type { AnyCredential, TenantRecord, TokenCredential } from "./model.js";
import { hashToken, parseToken, type TokenKind, tokenMatchesHash } from "./tokens.js";

/** Who a verified credential belongs to. Nothing in it is secret; fit for logs and audit. */
export interface TenantPrincipal {
  readonly tenantId: string;
  readonly role: "agent" | "caller";
  readonly credential: "token" | "certificate";
  /** The token id or certificate serial. */
  readonly credentialId: string;
}

export type TenantLookup = (tenantId: string) => TenantRecord | undefined;

/** The tenant a token names, without checking it: for the lookup before `verifyToken`. */
export function tenantIdOfToken(token: string): string | undefined {
  return parseToken(token)?.tenantId;
}

/**
 * Verifies a bearer token of `kind` against `tenant` (the record its tenant id names, or
 * undefined). Throws CredentialRefusedError with the reason.
 */
export function verifyToken(
  tenant: TenantRecord | undefined,
  token: string,
  kind: TokenKind,
  now: Date,
): TenantPrincipal {
  const parsed = parseToken(token);
  if (!parsed) throw refuse("malformed");
  if (parsed.kind !== kind) throw refuse("wrong-role");
  if (!tenant || tenant.id !== parsed.tenantId) throw refuse("unknown-tenant");
  if (tenant.state === "deleted") throw refuse("tenant-deleted");
  const list: readonly TokenCredential[] = kind === "agent" ? tenant.agentTokens : tenant.callerTokens;
  const credential = list.find((c) => c.id === parsed.tokenId);
  if (!credential) {
    // Hash anyway, so an unknown id costs what a known one does.
    hashToken(token);
    throw refuse("unknown-credential");
  }
  if (!tokenMatchesHash(token, credential.sha256)) throw refuse("mismatch");
  checkUsable(credential, now);
  return { tenantId: tenant.id, role: kind, credential: "token", credentialId: credential.id };
}

export const verifyAgentToken = (tenant: TenantRecord | undefined, token: string, now: Date) =>
  verifyToken(tenant, token, "agent", now);

export const verifyCallerToken = (tenant: TenantRecord | undefined, token: string, now: Date) =>
  verifyToken(tenant, token, "caller", now);

/** Looks the token's tenant up and verifies it: the whole check for a bearer token. */
export function authenticateToken(
  lookup: TenantLookup,
  token: string,
  kind: TokenKind,
  now: Date,
): TenantPrincipal {
  const tenantId = tenantIdOfToken(token);
  return verifyToken(tenantId === undefined ? undefined : lookup(tenantId), token, kind, now);
}

/** What the server knows of a client certificate whose chain TLS verified against the gateway CA. */
export interface PresentedCertificate {
  /** Node's `subjectaltname` text (tls.PeerCertificate) or X509Certificate.subjectAltName. */
  readonly subjectaltname?: string | undefined;
  /** Hex serial, as Node prints it (upper case, maybe with leading zeros). */
  readonly serialNumber: string;
}

/**
 * Authenticates a caller certificate. Call only after the TLS handshake verified the chain
 * against the gateway CA: this checks the tenant and the allowlist, not signatures.
 */
export function authenticateCallerCertificate(
  lookup: TenantLookup,
  cert: PresentedCertificate,
  now: Date,
): TenantPrincipal {
  const san = tenantIdFromSubjectAltName(cert.subjectaltname);
  if (!san.ok) throw refuse("malformed");
  const serial = normalizeSerial(cert.serialNumber);
  if (serial === undefined) throw refuse("malformed");
  const tenant = lookup(san.tenantId);
  if (!tenant) throw refuse("unknown-tenant");
  if (tenant.state === "deleted") throw refuse("tenant-deleted");
  const credential = tenant.callerCertificates.find((c) => c.id === serial);
  if (!credential) throw refuse("unknown-credential");
  checkUsable(credential, now);
  return { tenantId: tenant.id, role: "caller", credential: "certificate", credentialId: serial };
}

function checkUsable(credential: AnyCredential, now: Date): void {
  const status = credentialStatus(credential, now);
  if (status === "revoked" || status === "expired") throw refuse(status);
}

function refuse(reason: RefusalReason): CredentialRefusedError {
  return new CredentialRefusedError(reason);
}
