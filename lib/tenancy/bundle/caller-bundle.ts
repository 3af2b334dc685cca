/**
 * What a tenant's control plane needs to dial through the gateway: a client certificate and key
 * issued by the gateway CA for the tenant, the CA bundle to verify the gateway, and the
 * EgressSelectorConfiguration that points kube-apiserver at them (TCP+mTLS, plus the Unix socket
 * variant for a gateway next to kube-apiserver).
 *
 * Order of work: the output directory first (a bad --out fails before anything is issued), then
 * the certificate, then the store (the serial must be allowlisted before anyone can use the key),
 * then the files. A failure after the store write leaves a listed certificate whose key nobody
 * has: harmless, and revocable by its serial.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import type { CertificateAuthority } from "../../pki/ca.js";
import { writePemFiles } from "../../pki/files.js";
import { x509 } from "../../pki/x509.js";
import { callerUri, normalizeSerial } from "../caller-uri.js";
import type { TenantRecord } from "../model.js";
import { updateTenant } from "../mutate.js";
import { type AddOptions, addCallerCertificate, requireActive } from "../operations.js";
import type { TenantStore } from "../store.js";
import {
  BUNDLE_FILES,
  tcpEgressConfiguration,
  type UdsProxyProtocol,
  udsEgressConfiguration,
} from "./egress-selector.js";

/** Subject O of caller certificates: says what the certificate is to someone reading it. */
const CALLER_ORGANIZATION = "kgw:tenant-caller";
const DAY_MS = 86_400_000;

export interface CallerBundleOptions {
  ca: CertificateAuthority;
  /** PEM the kube-apiserver trusts for the gateway's serving certificate. */
  caBundlePem: string;
  gatewayUrl: string;
  outDir: string;
  mountDir: string;
  udsName: string;
  udsProxyProtocol: UdsProxyProtocol;
  certValidityMs: number;
  now: () => Date;
}

export interface WrittenBundle {
  readonly dir: string;
  readonly files: Readonly<Record<keyof typeof BUNDLE_FILES, string>>;
  readonly serial: string;
  readonly notAfter: string;
  readonly record: TenantRecord;
}

export async function writeCallerBundle(
  store: TenantStore,
  tenantId: string,
  o: CallerBundleOptions,
  add: AddOptions = {},
): Promise<WrittenBundle> {
  const dir = path.resolve(o.outDir);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // Fail on an unknown or deleted tenant before minting anything.
  requireActive(await store.get(tenantId), tenantId);
  const uri = callerUri(tenantId);
  const issued = await o.ca.issue({
    commonName: tenantId,
    organization: [CALLER_ORGANIZATION],
    uris: [uri],
    usage: "client",
    validityDays: o.certValidityMs / DAY_MS,
  });
  const cert = new x509.X509Certificate(issued.certPem);
  const serial = normalizeSerial(cert.serialNumber)!;
  const { notAfter } = cert;
  const record = await updateTenant(store, tenantId, (current) =>
    addCallerCertificate(
      requireActive(current, tenantId),
      { serial, subject: cert.subject, uri, notAfter },
      o.now(),
      add,
    ),
  );
  const files = await writePemFiles(dir, {
    [BUNDLE_FILES.caBundle]: o.caBundlePem,
    [BUNDLE_FILES.clientCert]: issued.certPem,
    [BUNDLE_FILES.clientKey]: issued.keyPem,
    [BUNDLE_FILES.egressTcp]: tcpEgressConfiguration({ tenantId, url: o.gatewayUrl, mountDir: o.mountDir }),
    [BUNDLE_FILES.egressUds]: udsEgressConfiguration({
      tenantId,
      udsName: o.udsName,
      proxyProtocol: o.udsProxyProtocol,
    }),
  });
  return {
    dir,
    files: {
      caBundle: files[BUNDLE_FILES.caBundle],
      clientCert: files[BUNDLE_FILES.clientCert],
      clientKey: files[BUNDLE_FILES.clientKey],
      egressTcp: files[BUNDLE_FILES.egressTcp],
      egressUds: files[BUNDLE_FILES.egressUds],
    },
    serial,
    notAfter: notAfter.toISOString(),
    record,
  };
}
