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
import type { CredentialRole } from "./model.js";
import { isValidTenantId } from "./tenant-id.js";

const TENANT_URI = /^kgw:\/\/tenant\/([a-z0-9-]{1,63})\/(agent|caller)$/;
const OUR_SCHEME = "kgw://";

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
 * `DNS:a, URI:kgw://tenant/acme/caller`. Node prints a value holding a comma, a quote or a
 * control character as a JSON string, so a DNS name such as `x, URI:kgw://…` stays one quoted
 * value and cannot smuggle in a URI. Exactly one URI with our scheme is required: two are refused
 * even when they name the same tenant and role, so that no certificate is ever read two ways.
 */
export function identityFromSubjectAltName(san: string | undefined): SanResult {
  if (san === undefined || san === "") return { ok: false, reason: "no subjectAltName" };
  const entries = splitAltNames(san);
  if (entries === undefined) return { ok: false, reason: "unparseable subjectAltName" };
  const ours = entries.filter((e) => e.type === "URI" && e.value.toLowerCase().startsWith(OUR_SCHEME));
  if (ours.length === 0) return { ok: false, reason: "no kgw URI SAN" };
  if (ours.length > 1) return { ok: false, reason: "more than one kgw URI SAN" };
  const identity = parseTenantUri(ours[0]!.value);
  return identity ? { ok: true, ...identity } : { ok: false, reason: "kgw URI SAN is not a tenant URI" };
}

interface AltName {
  type: string;
  value: string;
}

function splitAltNames(text: string): AltName[] | undefined {
  const out: AltName[] = [];
  let i = 0;
  while (i < text.length) {
    const colon = text.indexOf(":", i);
    if (colon === -1) return undefined;
    const type = text.slice(i, colon);
    let value: string;
    let end: number;
    if (text[colon + 1] === '"') {
      end = closingQuote(text, colon + 2);
      if (end === -1) return undefined;
      try {
        value = JSON.parse(text.slice(colon + 1, end + 1)) as string;
      } catch {
        return undefined;
      }
      end += 1;
    } else {
      end = text.indexOf(", ", colon + 1);
      if (end === -1) end = text.length;
      value = text.slice(colon + 1, end);
    }
    out.push({ type, value });
    if (end === text.length) break;
    if (!text.startsWith(", ", end)) return undefined;
    i = end + 2;
  }
  return out;
}

function closingQuote(text: string, from: number): number {
  for (let i = from; i < text.length; i++) {
    if (text[i] === "\\") i++;
    else if (text[i] === '"') return i;
  }
  return -1;
}

/** Certificate serial as the record keeps it: lower-case hex without leading zeros. */
export function normalizeSerial(serial: string): string | undefined {
  const hex = serial.replace(/:/g, "").toLowerCase();
  if (!/^[0-9a-f]{1,64}$/.test(hex)) return undefined;
  return hex.replace(/^0+(?=.)/, "");
}
