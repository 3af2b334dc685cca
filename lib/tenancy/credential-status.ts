/**
 * Whether a credential is valid at a given time. One function, used by verification and by
 * `kgw tenant show`, so what the operator sees is what the gateway enforces.
 */
import type { AnyCredential, CertificateCredential } from "./model.js";

/** "expiring": valid, but rotated out and inside its grace period. */
export type CredentialStatus = "active" | "expiring" | "expired" | "revoked";

export function credentialStatus(credential: AnyCredential, now: Date): CredentialStatus {
  if (credential.revokedAt !== null) return "revoked";
  const t = now.getTime();
  if (isCertificate(credential) && t >= Date.parse(credential.notAfter)) return "expired";
  if (credential.expiresAt === null) return "active";
  return t < Date.parse(credential.expiresAt) ? "expiring" : "expired";
}

export function isUsable(credential: AnyCredential, now: Date): boolean {
  const status = credentialStatus(credential, now);
  return status === "active" || status === "expiring";
}

/** When the credential stopped being usable (for pruning), or null while it is usable. */
export function inactiveSince(credential: AnyCredential, now: Date): number | null {
  if (isUsable(credential, now)) return null;
  if (credential.revokedAt !== null) return Date.parse(credential.revokedAt);
  const ends = [credential.expiresAt, isCertificate(credential) ? credential.notAfter : null]
    .filter((t): t is string => t !== null)
    .map((t) => Date.parse(t));
  return Math.min(...ends);
}

function isCertificate(credential: AnyCredential): credential is CertificateCredential {
  return "notAfter" in credential;
}
