/**
 * Checks a presented credential against a tenant's record. Pure and synchronous: the server
 * calls these on a snapshot it already holds (TenantWatch.get), so a handshake does no I/O.
 *
 * Lookup never scans: a token names its tenant and id (tokens.ts), a certificate names its
 * tenant and role in a URI SAN (tenant-uri.ts); the record then has the one hash or serial to
 * check. Secrets are compared in constant time and never appear in errors or logs.
 *
 * A credential is checked once, when a stream or tunnel opens; `recheckPrincipal` is how the
 * server asks again later whether what it let in is still allowed.
 */

import { credentialStatus } from "./credential-status.js";
import { CredentialRefusedError, type RefusalReason } from "./errors.js";
import {
  type AnyCredential,
  type CredentialForm,
  type CredentialRole,
  credentialKind,
  credentialsOf,
  type TenantRecord,
  type TokenCredential,
} from "./model.js";
import { identityFromSubjectAltName, normalizeSerial } from "./tenant-uri.js";
import { hashToken, parseToken, type TokenKind, tokenMatchesHash } from "./tokens.js";

/** Who a verified credential belongs to. Nothing in it is secret; fit for logs and audit. */
export interface TenantPrincipal {
  readonly tenantId: string;
  readonly role: CredentialRole;
  readonly credential: CredentialForm;
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
  if (tenant.state === "deleted") throw refuse("tenant-deleted", { tenant: tenant.id });
  const list: readonly TokenCredential[] = kind === "agent" ? tenant.agentTokens : tenant.callerTokens;
  const credential = list.find((c) => c.id === parsed.tokenId);
  if (!credential) {
    // Hash anyway, so an unknown id costs what a known one does.
    hashToken(token);
    throw refuse("unknown-credential", { tenant: tenant.id });
  }
  const claimed = { tenant: tenant.id, credential: `token:${credential.id}` };
  if (!tokenMatchesHash(token, credential.sha256)) throw refuse("mismatch", claimed);
  checkUsable(credential, now, claimed);
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
 * Authenticates a certificate presented for `role`. Call only after the TLS handshake verified
 * the chain against the gateway CA: this checks the role and tenant its URI names, and the
 * allowlist of that role in the tenant's record, not signatures. A certificate issued for the
 * other role is refused before any lookup ("wrong-role"), as a token of the other kind is.
 */
export function authenticateCertificate(
  lookup: TenantLookup,
  cert: PresentedCertificate,
  role: CredentialRole,
  now: Date,
): TenantPrincipal {
  const san = identityFromSubjectAltName(cert.subjectaltname);
  if (!san.ok) throw refuse("malformed");
  if (san.role !== role) throw refuse("wrong-role");
  const serial = normalizeSerial(cert.serialNumber);
  if (serial === undefined) throw refuse("malformed");
  const tenant = lookup(san.tenantId);
  if (!tenant) throw refuse("unknown-tenant");
  if (tenant.state === "deleted") throw refuse("tenant-deleted", { tenant: tenant.id });
  const credential = credentialsOf(tenant, credentialKind(role, "certificate")).find((c) => c.id === serial);
  if (!credential) throw refuse("unknown-credential", { tenant: tenant.id });
  checkUsable(credential, now, { tenant: tenant.id, credential: `cert:${credential.id}` });
  return { tenantId: tenant.id, role, credential: "certificate", credentialId: serial };
}

/** A kube-apiserver's (or other caller's) certificate: URI `kgw://tenant/<id>/caller`. */
export const authenticateCallerCertificate = (lookup: TenantLookup, cert: PresentedCertificate, now: Date) =>
  authenticateCertificate(lookup, cert, "caller", now);

/** An agent's certificate: URI `kgw://tenant/<id>/agent`, listed in the tenant's agentCertificates. */
export const authenticateAgentCertificate = (lookup: TenantLookup, cert: PresentedCertificate, now: Date) =>
  authenticateCertificate(lookup, cert, "agent", now);

/** One key per credential, the same on every connection it opened. */
export function principalKey(principal: TenantPrincipal): string {
  return `${principal.tenantId}/${principal.role}/${principal.credential}/${principal.credentialId}`;
}

/**
 * undefined while the credential `principal` was authenticated with is still usable in the
 * current record; otherwise why not. What the server asks of every live credential after a
 * change in the store, and as time passes (grace periods and notAfter run out on their own).
 * The same rules as the first check, minus what cannot have changed (the presented secret or
 * certificate): a record gone is "unknown-tenant", a tombstone "tenant-deleted", a credential
 * forgotten (pruned, or the tenant deleted and created again) "unknown-credential".
 */
export function recheckPrincipal(
  lookup: TenantLookup,
  principal: TenantPrincipal,
  now: Date,
): RefusalReason | undefined {
  const tenant = lookup(principal.tenantId);
  if (!tenant || tenant.id !== principal.tenantId) return "unknown-tenant";
  if (tenant.state === "deleted") return "tenant-deleted";
  const kind = credentialKind(principal.role, principal.credential);
  const credential = credentialsOf(tenant, kind).find((c) => c.id === principal.credentialId);
  if (!credential) return "unknown-credential";
  const status = credentialStatus(credential, now);
  return status === "revoked" || status === "expired" ? status : undefined;
}

function checkUsable(credential: AnyCredential, now: Date, claimed: ClaimedBy): void {
  const status = credentialStatus(credential, now);
  if (status === "revoked" || status === "expired") throw refuse(status, claimed);
}

type ClaimedBy = CredentialRefusedError["claimedBy"];

function refuse(reason: RefusalReason, claimed?: ClaimedBy): CredentialRefusedError {
  return new CredentialRefusedError(reason, claimed);
}
