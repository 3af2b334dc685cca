/**
 * The certificate chain a TLS server presents, built once at start-up instead of in every
 * handshake.
 *
 * Given a certificate file that holds the leaf alone, OpenSSL completes the chain itself from the
 * context's trust store (the `ca` given for client certificates) on every handshake
 * (`ssl_add_cert_chain`: an X509_verify_cert of our own certificate, its CA's signature checked
 * each time): about 6% of a handshake's CPU on Node 24, measured for issue 26. Handing
 * OpenSSL the same chain up front makes it send exactly those certificates and skip the
 * building. What goes on the wire does not change: the leaf, then each issuer found in `ca` up to
 * a self-signed one, which is what OpenSSL builds; a leaf whose issuer is not in `ca`, or a file
 * that already holds a chain, is left as it is.
 */
import { X509Certificate } from "node:crypto";

/** Longest chain followed: well past any real PKI, a stop for a loop of cross-signed CAs. */
const MAX_CHAIN_DEPTH = 8;

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

function certificatesIn(pem: Buffer): string[] {
  return pem.toString("utf8").match(PEM_CERTIFICATE) ?? [];
}

/** `child` names `parent` as its issuer and `parent`'s key signed it. */
function issuedBy(child: X509Certificate, parent: X509Certificate): boolean {
  return child.checkIssued(parent) && child.verify(parent.publicKey);
}

/**
 * `certPem` with the issuers from `caPem` appended, in order, when it holds one certificate;
 * otherwise `certPem` unchanged (also when a PEM cannot be read: Node reports that as it would).
 */
export function withIssuerChain(certPem: Buffer, caPem: Buffer | undefined): Buffer {
  if (!caPem) return certPem;
  const own = certificatesIn(certPem);
  if (own.length !== 1) return certPem;
  let cas: { pem: string; cert: X509Certificate }[];
  let current: X509Certificate;
  try {
    cas = certificatesIn(caPem).map((pem) => ({ pem, cert: new X509Certificate(pem) }));
    current = new X509Certificate(own[0]!);
  } catch {
    return certPem;
  }
  const chain: string[] = [];
  for (let depth = 0; depth < MAX_CHAIN_DEPTH && !issuedBy(current, current); depth++) {
    const issuer = cas.find((ca) => issuedBy(current, ca.cert));
    if (!issuer) break;
    chain.push(issuer.pem);
    current = issuer.cert;
  }
  if (chain.length === 0) return certPem;
  return Buffer.from(`${[own[0]!, ...chain].join("\n")}\n`, "utf8");
}
