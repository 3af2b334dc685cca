/**
 * Who may be on either end of a peer link: a certificate that chains to the peer CA
 * (--peer-ca-cert) AND carries the URI SAN `kgw://fleet/peer`. The chain alone is not enough:
 * an operator may run one CA for every role, and a peer link can dial as any tenant, so a
 * tenant's caller or agent certificate (`kgw://tenant/<id>/<role>`, lib/tenancy/tenant-uri.ts)
 * must never open one. The reverse holds too: the tenant authenticators refuse a certificate
 * whose kgw URI is not a tenant URI, so a peer certificate is no tenant credential.
 *
 * Exactly one `kgw://` URI SAN is allowed, as for tenant certificates: a certificate is never
 * read two ways. The client end checks the server's certificate the same way instead of a host
 * name: instances come and go at addresses the registry hands out, and what matters is that the
 * other end is one of the fleet's instances.
 */
import type { PeerCertificate } from "node:tls";
import { type CaPems, type IssuedCertificate, type IssueOptions, issueCertificate } from "../../pki/issue.js";

export const PEER_IDENTITY_URI = "kgw://fleet/peer";

const OUR_SCHEME = "kgw://";

/** Why `san` is not a peer identity, or null when it is one. */
export function peerIdentityProblem(san: string | undefined): string | null {
  if (san === undefined || san === "") return "the certificate has no subjectAltName";
  const entries = splitAltNames(san);
  if (entries === undefined) return "the certificate's subjectAltName cannot be read";
  const ours = entries.filter((e) => e.type === "URI" && e.value.toLowerCase().startsWith(OUR_SCHEME));
  if (ours.length === 0) return `the certificate has no ${PEER_IDENTITY_URI} URI SAN`;
  if (ours.length > 1) return "the certificate has more than one kgw URI SAN";
  if (ours[0]!.value !== PEER_IDENTITY_URI) {
    return `the certificate's kgw URI SAN is not ${PEER_IDENTITY_URI}`;
  }
  return null;
}

/** The problem with a verified certificate as a peer's, or null when it is a fleet peer. */
export function peerCertificateProblem(cert: PeerCertificate | undefined | null): string | null {
  if (!cert || Object.keys(cert).length === 0) return "no client certificate";
  return peerIdentityProblem(cert.subjectaltname);
}

/**
 * For `tls.connect`'s `checkServerIdentity`: the server must be a fleet peer (its chain was
 * already verified against the peer CA). Returns an Error to refuse the connection.
 */
export function checkPeerServerIdentity(_host: string, cert: PeerCertificate): Error | undefined {
  const problem = peerCertificateProblem(cert);
  return problem === null ? undefined : new Error(`the peer's server certificate is refused: ${problem}`);
}

interface AltName {
  type: string;
  value: string;
}

/**
 * Node's text form of the SANs (`DNS:a, URI:kgw://…`): a value holding a comma, a quote or a
 * control character is printed as a JSON string, so it stays one value and cannot smuggle in a
 * URI. The same reading as lib/tenancy/tenant-uri.ts.
 */
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

/**
 * What to issue an instance's peer certificate with (lib/pki/issue.ts): the peer URI, usable as
 * server (its peer port) and client (its own peer links). Names are optional: peers check the
 * URI, not a host name.
 */
export function peerCertificateOptions(commonName = "kgw-fleet-peer"): IssueOptions {
  return { commonName, uris: [PEER_IDENTITY_URI], usage: "both" };
}

/** Issues a fleet peer certificate (and its key) from `ca`, the fleet's peer CA. */
export function issuePeerCertificate(ca: CaPems, commonName?: string): Promise<IssuedCertificate> {
  return issueCertificate(ca, peerCertificateOptions(commonName));
}
