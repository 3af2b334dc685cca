/**
 * Who may be on either end of a peer link: a certificate that chains to the peer CA
 * (--peer-ca-cert) AND carries the URI SAN `kgw://fleet/peer`. The chain alone is not enough:
 * an operator may run one CA for every role, and a peer link can dial as any tenant, so a
 * tenant's caller or agent certificate (`kgw://tenant/<id>/<role>`, lib/tenancy/tenant-uri.ts)
 * must never open one. The reverse holds too: the tenant authenticators refuse a certificate
 * whose kgw URI is not a tenant URI, so a peer certificate is no tenant credential.
 *
 * Exactly one `kgw://` URI SAN is allowed, as for tenant certificates (lib/pki/kgw-uri.ts reads it
 * for both): a certificate is never read two ways. The client end checks the server's certificate
 * the same way instead of a host name: instances come and go at addresses the registry hands out,
 * and what matters is that the other end is one of the fleet's instances.
 *
 * Issuing one is peer-certificate-issue.ts: this file is on every hosted server's start-up path,
 * and the certificate code (@peculiar/x509) is not needed there.
 */
import type { PeerCertificate } from "node:tls";
import { type KgwUriRefusal, kgwUriOf } from "../../pki/kgw-uri.js";

export const PEER_IDENTITY_URI = "kgw://fleet/peer";

/** Why `san` is not a peer identity, or null when it is one. */
export function peerIdentityProblem(san: string | undefined): string | null {
  const read = kgwUriOf(san);
  if (!read.ok) return REFUSAL_PROBLEMS[read.refusal];
  if (read.uri !== PEER_IDENTITY_URI) return `the certificate's kgw URI SAN is not ${PEER_IDENTITY_URI}`;
  return null;
}

const REFUSAL_PROBLEMS: Record<KgwUriRefusal, string> = {
  "no-san": "the certificate has no subjectAltName",
  unreadable: "the certificate's subjectAltName cannot be read",
  none: `the certificate has no ${PEER_IDENTITY_URI} URI SAN`,
  several: "the certificate has more than one kgw URI SAN",
};

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
