import { createPrivateKey, X509Certificate as NodeX509Certificate } from "node:crypto";
import { isIP } from "node:net";
import { exportPrivateKeyPem, generateKeyPair, importSigningKey, withTrailingNewline } from "./keys.js";
import { randomSerialNumber, subjectName, validityWindow } from "./template.js";
import { x509 } from "./x509.js";

/** The PEM pair of a CA able to sign certificates. */
export interface CaPems {
  readonly certPem: string;
  readonly keyPem: string;
}

export type CertificateUsage = "server" | "client" | "both";

export interface IssueOptions {
  commonName: string;
  /** Subject O attributes; Kubernetes maps these to groups for client certificates. */
  organization?: readonly string[];
  dnsNames?: readonly string[];
  /** IPv4 or IPv6 literals, without zone ids. */
  ipAddresses?: readonly string[];
  /** URI SANs (e.g. a tenant's `kgw://tenant/<id>/caller`); absolute, printable ASCII only. */
  uris?: readonly string[];
  usage: CertificateUsage;
  /** Defaults to 365; never extends past the CA's own expiry. */
  validityDays?: number;
}

export interface IssuedCertificate {
  /** PEM certificate (leaf only, no chain). */
  readonly certPem: string;
  /** PKCS#8 PEM ("BEGIN PRIVATE KEY") of a fresh ECDSA P-256 key. */
  readonly keyPem: string;
}

export const DEFAULT_LEAF_VALIDITY_DAYS = 365;

const EXTENDED_KEY_USAGES: Readonly<Record<CertificateUsage, readonly string[]>> = {
  server: [x509.ExtendedKeyUsage.serverAuth],
  client: [x509.ExtendedKeyUsage.clientAuth],
  both: [x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth],
};

/** Issues a leaf certificate with a freshly generated key, signed by `ca`. */
export async function issueCertificate(ca: CaPems, options: IssueOptions): Promise<IssuedCertificate> {
  // Object.hasOwn, not a plain lookup: callers outside TypeScript could pass "toString" and friends.
  if (!Object.hasOwn(EXTENDED_KEY_USAGES, options.usage)) {
    throw new TypeError(`usage must be "server", "client" or "both", got ${JSON.stringify(options.usage)}`);
  }
  const subject = subjectName(options.commonName, options.organization);
  const altNames = subjectAltNames(options);
  const caCert = parseCa(ca);
  const validity = validityWindow(options.validityDays ?? DEFAULT_LEAF_VALIDITY_DAYS, caCert.notAfter);
  const signer = await importSigningKey(ca.keyPem);
  const keys = await generateKeyPair();

  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialNumber(),
    subject,
    // The CA's Name object, not a re-encoding of its text form: chain building matches the issuer
    // against the CA subject byte for byte.
    issuer: caCert.subjectName,
    ...validity,
    publicKey: keys.publicKey,
    signingKey: signer.key,
    signingAlgorithm: signer.algorithm,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.ExtendedKeyUsageExtension([...EXTENDED_KEY_USAGES[options.usage]]),
      ...(altNames.length > 0 ? [new x509.SubjectAlternativeNameExtension(altNames)] : []),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      await authorityKeyIdentifier(caCert),
    ],
  });
  return {
    certPem: withTrailingNewline(cert.toString("pem")),
    keyPem: await exportPrivateKeyPem(keys.privateKey),
  };
}

/**
 * Parses a CA pair and checks it can actually sign: a wrong file passed here would otherwise yield
 * certificates that only fail later, at some peer's handshake.
 */
export function parseCa(ca: CaPems): x509.X509Certificate {
  const cert = new x509.X509Certificate(ca.certPem);
  const constraints = cert.getExtension(x509.BasicConstraintsExtension);
  if (!constraints?.ca) {
    throw new Error(`certificate "${cert.subject}" is not a CA (basicConstraints cA is not set)`);
  }
  const keyUsage = cert.getExtension(x509.KeyUsagesExtension);
  if (keyUsage && (keyUsage.usages & x509.KeyUsageFlags.keyCertSign) === 0) {
    throw new Error(`CA certificate "${cert.subject}" does not allow keyCertSign`);
  }
  if (!new NodeX509Certificate(ca.certPem).checkPrivateKey(createPrivateKey(ca.keyPem))) {
    throw new Error(`private key does not match CA certificate "${cert.subject}"`);
  }
  return cert;
}

async function authorityKeyIdentifier(caCert: x509.X509Certificate): Promise<x509.Extension> {
  // Reuse the CA's own SKI instead of recomputing it: a CA we did not create may have derived its
  // SKI by another method, and the AKI must match it exactly for chain building.
  const ski = caCert.getExtension(x509.SubjectKeyIdentifierExtension);
  return ski
    ? new x509.AuthorityKeyIdentifierExtension(ski.keyId)
    : x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey);
}

function subjectAltNames(options: IssueOptions): x509.JsonGeneralName[] {
  const dns = (options.dnsNames ?? []).map((name) => ({ type: "dns" as const, value: checkDnsName(name) }));
  const ips = (options.ipAddresses ?? []).map((ip) => ({ type: "ip" as const, value: sanIpAddress(ip) }));
  const uris = (options.uris ?? []).map((uri) => ({ type: "url" as const, value: checkUri(uri) }));
  return [...dns, ...ips, ...uris];
}

const DNS_NAME = /^(\*\.)?[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;

function checkDnsName(name: string): string {
  if (isIP(name) !== 0) {
    // TLS clients only match IP literals against IP SANs, so this would silently never verify.
    throw new TypeError(`"${name}" is an IP address; pass it in ipAddresses, not dnsNames`);
  }
  if (!DNS_NAME.test(name)) {
    throw new TypeError(`invalid DNS name in dnsNames: ${JSON.stringify(name)}`);
  }
  return name;
}

// A scheme, then printable ASCII without spaces (RFC 3986 characters are a subset): an IA5String
// SAN cannot hold more, and a verifier comparing URIs must see exactly what we meant.
const URI = /^[A-Za-z][A-Za-z0-9+.-]*:[\x21-\x7e]+$/;

function checkUri(uri: string): string {
  if (!URI.test(uri)) throw new TypeError(`invalid URI in uris: ${JSON.stringify(uri)}`);
  return uri;
}

/**
 * Normalises an IP literal into a form @peculiar/x509 encodes correctly: it misreads IPv6 with an
 * embedded dotted quad (e.g. "::ffff:10.0.0.1"), so that tail is rewritten as two hex groups.
 */
function sanIpAddress(ip: string): string {
  const family = isIP(ip);
  if (family === 4) {
    return ip;
  }
  if (family !== 6 || ip.includes("%")) {
    throw new TypeError(`invalid IP address in ipAddresses: ${JSON.stringify(ip)}`);
  }
  const dottedTail = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(ip);
  if (!dottedTail) {
    return ip;
  }
  const [a, b, c, d] = dottedTail.slice(1).map(Number) as [number, number, number, number];
  const hexTail = `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  return ip.slice(0, dottedTail.index) + hexTail;
}
