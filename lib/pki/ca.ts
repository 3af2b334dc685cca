import {
  type CaPems,
  type IssuedCertificate,
  type IssueOptions,
  issueCertificate,
  parseCa,
} from "./issue.js";
import { exportPrivateKeyPem, generateKeyPair, withTrailingNewline } from "./keys.js";
import { randomSerialNumber, subjectName, validityWindow } from "./template.js";
import { x509 } from "./x509.js";

export interface CertificateAuthority extends CaPems {
  /** Same as `issueCertificate(this, options)`. */
  issue(options: IssueOptions): Promise<IssuedCertificate>;
}

export interface CreateCaOptions {
  commonName: string;
  organization?: readonly string[];
  /** Defaults to 3650. */
  validityDays?: number;
}

export const DEFAULT_CA_VALIDITY_DAYS = 3650;

/** Creates a self-signed root CA with a fresh ECDSA P-256 key. */
export async function createCa(options: CreateCaOptions): Promise<CertificateAuthority> {
  const keys = await generateKeyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialNumber(),
    name: subjectName(options.commonName, options.organization),
    ...validityWindow(options.validityDays ?? DEFAULT_CA_VALIDITY_DAYS),
    keys,
    signingAlgorithm: { name: "ECDSA", hash: "SHA-256" },
    extensions: [
      // pathLen 0: this CA only signs leaves, so verifiers refuse any intermediate CA it might
      // be tricked into signing.
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return bind({
    certPem: withTrailingNewline(cert.toString("pem")),
    keyPem: await exportPrivateKeyPem(keys.privateKey),
  });
}

/**
 * Wraps an existing CA (e.g. read from disk). Validates eagerly so a misconfigured CA fails at
 * startup rather than at the first issuance.
 */
export function loadCa(pems: CaPems): CertificateAuthority {
  parseCa(pems);
  return bind({ certPem: pems.certPem, keyPem: pems.keyPem });
}

function bind(pems: CaPems): CertificateAuthority {
  return Object.freeze({ ...pems, issue: (options: IssueOptions) => issueCertificate(pems, options) });
}
