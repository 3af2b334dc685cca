/**
 * The identity in a tenant's client certificate: one URI SAN `kgw://tenant/<id>/<role>`, the role
 * `caller` (kube-apiserver) or `agent`.
 *
 * A URI SAN rather than the subject: kube-apiserver does not care what its egress client
 * certificate says, the subject's text is easy to get subtly wrong (escaping, multi-valued
 * RDNs), and a URI has one unambiguous form. The role is part of the URI, so a certificate issued
 * for one role can never be taken for the other's, even though one CA signs both.
 * Authorization does not rest on the URI alone: the serial must also be listed, usable, in the
 * tenant's record, in the list of that role (an allowlist: an unknown certificate is refused,
 * even from our CA).
 */
import { type KgwUriRefusal, kgwUriOf } from "../pki/kgw-uri.js";
import type { CredentialRole } from "./model.js";
import { isValidTenantId } from "./tenant-id.js";

const TENANT_URI = /^kgw:\/\/tenant\/([a-z0-9-]{1,63})\/(agent|caller)$/;

/** Who a certificate claims to be; the claim still has to be found in the tenant's record. */
export interface CertificateIdentity {
  readonly tenantId: string;
  readonly role: CredentialRole;
}

export function tenantUri(tenantId: string, role: CredentialRole): string {
  return `kgw://tenant/${tenantId}/${role}`;
}

export const callerUri = (tenantId: string): string => tenantUri(tenantId, "caller");
export const agentUri = (tenantId: string): string => tenantUri(tenantId, "agent");

/** The tenant and role of one of our URIs, or undefined for anything else (never throws). */
export function parseTenantUri(uri: string): CertificateIdentity | undefined {
  const m = TENANT_URI.exec(uri);
  if (!m || !isValidTenantId(m[1])) return undefined;
  return { tenantId: m[1], role: m[2] as CredentialRole };
}

export type SanResult = ({ ok: true } & CertificateIdentity) | { ok: false; reason: string };

/**
 * The tenant and role named by a certificate's SANs, in Node's text form
 * (`PeerCertificate.subjectaltname`, `X509Certificate.subjectAltName`):
 * `DNS:a, URI:kgw://tenant/acme/caller`. The one kgw URI is read by lib/pki/kgw-uri.ts (two are
 * refused even when they name the same tenant and role); it must then be a tenant URI.
 */
export function identityFromSubjectAltName(san: string | undefined): SanResult {
  const read = kgwUriOf(san);
  if (!read.ok) return { ok: false, reason: REFUSAL_REASONS[read.refusal] };
  const identity = parseTenantUri(read.uri);
  return identity ? { ok: true, ...identity } : { ok: false, reason: "kgw URI SAN is not a tenant URI" };
}

const REFUSAL_REASONS: Record<KgwUriRefusal, string> = {
  "no-san": "no subjectAltName",
  unreadable: "unparseable subjectAltName",
  none: "no kgw URI SAN",
  several: "more than one kgw URI SAN",
};

/** Certificate serial as the record keeps it: lower-case hex without leading zeros. */
export function normalizeSerial(serial: string): string | undefined {
  const hex = serial.replace(/:/g, "").toLowerCase();
  if (!/^[0-9a-f]{1,64}$/.test(hex)) return undefined;
  return hex.replace(/^0+(?=.)/, "");
}
