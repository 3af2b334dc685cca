/**
 * The one `kgw://` URI SAN of a certificate: the only place that reads a certificate's identity
 * out of its SANs. Tenant certificates (`kgw://tenant/<id>/<role>`, lib/tenancy/tenant-uri.ts)
 * and fleet peer certificates (`kgw://fleet/peer`, lib/fleet/peer/peer-identity.ts) both carry
 * exactly one; each caller decides what the URI it gets back means.
 *
 * Exactly one URI with our scheme (compared case-insensitively, so `KGW://` counts) is
 * required: two are refused even when they are equal, so that no certificate is ever read two
 * ways. Security-critical: test/unit/kgw-uri.test.ts holds every case, read by both callers.
 */

export const KGW_SCHEME = "kgw://";

/**
 * Why a SAN list yields no kgw URI: `no-san` (absent or empty), `unreadable` (not Node's text
 * form), `none` (no URI with our scheme), `several` (more than one).
 */
export type KgwUriRefusal = "no-san" | "unreadable" | "none" | "several";

export type KgwUriResult = { ok: true; uri: string } | { ok: false; refusal: KgwUriRefusal };

/**
 * The kgw URI named by a certificate's SANs, in Node's text form
 * (`PeerCertificate.subjectaltname`, `X509Certificate.subjectAltName`):
 * `DNS:a, URI:kgw://tenant/acme/caller`. Node prints a value holding a comma, a quote or a
 * control character as a JSON string, so a DNS name such as `x, URI:kgw://…` stays one quoted
 * value and cannot smuggle in a URI.
 */
export function kgwUriOf(san: string | undefined): KgwUriResult {
  if (san === undefined || san === "") return { ok: false, refusal: "no-san" };
  const entries = splitAltNames(san);
  if (entries === undefined) return { ok: false, refusal: "unreadable" };
  const ours = entries.filter((e) => e.type === "URI" && e.value.toLowerCase().startsWith(KGW_SCHEME));
  if (ours.length === 0) return { ok: false, refusal: "none" };
  if (ours.length > 1) return { ok: false, refusal: "several" };
  return { ok: true, uri: ours[0]!.value };
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
