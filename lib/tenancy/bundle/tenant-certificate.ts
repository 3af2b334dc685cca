/**
 * Issues a client certificate of the gateway CA to a tenant, for one role, and allowlists its
 * serial in the tenant's record. Shared by the caller bundle (kube-apiserver) and the agent
 * bundle: the two differ only in the URI, the subject's O, the record list, and the files around
 * them.
 *
 * The key is fresh (P-256) and returned to be written once; it is never stored. The serial is
 * listed before the caller writes any file: a failure in between leaves a listed certificate
 * whose key nobody has, harmless and revocable by its serial.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { CertificateAuthority } from "../../pki/ca.js";
import { writePemFiles } from "../../pki/files.js";
import { x509 } from "../../pki/x509.js";
import type { CredentialRole, TenantRecord } from "../model.js";
import { updateTenant } from "../mutate.js";
import { type AddOptions, addCertificate, requireActive } from "../operations.js";
import type { TenantStore } from "../store.js";
import { normalizeSerial, tenantUri } from "../tenant-uri.js";

/** Subject O: says what the certificate is to someone reading it (the URI is what is checked). */
const ORGANIZATION: Readonly<Record<CredentialRole, string>> = {
  caller: "kgw:tenant-caller",
  agent: "kgw:tenant-agent",
};
const DAY_MS = 86_400_000;

export interface CertificateIssuer {
  ca: CertificateAuthority;
  certValidityMs: number;
  now: () => Date;
}

export interface IssuedTenantCertificate {
  readonly certPem: string;
  /** PKCS#8 PEM of the fresh key: write it once (mode 0600), keep it nowhere else. */
  readonly keyPem: string;
  /** Lower-case hex without leading zeros: the credential id `show` lists and `revoke` takes. */
  readonly serial: string;
  readonly notAfter: string;
  /** The record as written, with the certificate listed. */
  readonly record: TenantRecord;
}

export async function issueTenantCertificate(
  store: TenantStore,
  tenantId: string,
  role: CredentialRole,
  o: CertificateIssuer,
  add: AddOptions = {},
): Promise<IssuedTenantCertificate> {
  // Fail on an unknown or deleted tenant before minting anything.
  requireActive(await store.get(tenantId), tenantId);
  const uri = tenantUri(tenantId, role);
  const issued = await o.ca.issue({
    commonName: tenantId,
    organization: [ORGANIZATION[role]],
    uris: [uri],
    usage: "client",
    validityDays: o.certValidityMs / DAY_MS,
  });
  const cert = new x509.X509Certificate(issued.certPem);
  const serial = normalizeSerial(cert.serialNumber)!;
  const { notAfter } = cert;
  const record = await updateTenant(store, tenantId, (current) =>
    addCertificate(
      requireActive(current, tenantId),
      role === "agent" ? "agent-certificate" : "caller-certificate",
      { serial, subject: cert.subject, uri, notAfter },
      o.now(),
      add,
    ),
  );
  return { certPem: issued.certPem, keyPem: issued.keyPem, serial, notAfter: notAfter.toISOString(), record };
}

/** Where a bundle is written and for whom: the tenant, the role its certificate is for, the CA. */
export interface BundleRequest {
  store: TenantStore;
  tenantId: string;
  role: CredentialRole;
  issuer: CertificateIssuer & { outDir: string };
  add: AddOptions;
}

/** A bundle as written: its directory, the path of each file by key, and its certificate. */
export interface WrittenCertificateBundle<K extends string> {
  readonly dir: string;
  readonly files: Readonly<Record<K, string>>;
  readonly serial: string;
  readonly notAfter: string;
  readonly record: TenantRecord;
}

/**
 * Either bundle's order of work: the output directory first (a bad --out fails before anything
 * is issued), then the certificate and the store, then the files in the order `contents` gives
 * them (writePemFiles gives the key 0600 and the rest 0644, each file renamed into place).
 * `layout` names the file of each key; the paths written come back under the same keys.
 */
export async function writeCertificateBundle<K extends string>(
  { store, tenantId, role, issuer, add }: BundleRequest,
  layout: Readonly<Record<K, string>>,
  contents: (issued: IssuedTenantCertificate) => Readonly<Record<K, string>>,
): Promise<WrittenCertificateBundle<K>> {
  const dir = path.resolve(issuer.outDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const issued = await issueTenantCertificate(store, tenantId, role, issuer, add);
  const byKey = Object.entries(contents(issued)) as [K, string][];
  const written = await writePemFiles(dir, Object.fromEntries(byKey.map(([k, text]) => [layout[k], text])));
  const files = Object.fromEntries(byKey.map(([k]) => [k, written[layout[k]]])) as Record<K, string>;
  return { dir, files, serial: issued.serial, notAfter: issued.notAfter, record: issued.record };
}
