/**
 * What a tenant's control plane needs to dial through the gateway: a client certificate and key
 * issued by the gateway CA for the tenant, the CA bundle to verify the gateway, and the
 * EgressSelectorConfiguration that points kube-apiserver at them (TCP+mTLS, plus the Unix socket
 * variant for a gateway next to kube-apiserver).
 *
 * Order of work: the output directory first (a bad --out fails before anything is issued), then
 * the certificate and the store (tenant-certificate.ts: the serial is allowlisted before anyone
 * can use the key), then the files. A failure after the store write leaves a listed certificate
 * whose key nobody has: harmless, and revocable by its serial.
 */
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { writePemFiles } from "../../pki/files.js";
import type { TenantRecord } from "../model.js";
import type { AddOptions } from "../operations.js";
import type { TenantStore } from "../store.js";
import {
  BUNDLE_FILES,
  tcpEgressConfiguration,
  type UdsProxyProtocol,
  udsEgressConfiguration,
} from "./egress-selector.js";
import { type CertificateIssuer, issueTenantCertificate } from "./tenant-certificate.js";

export interface CallerBundleOptions extends CertificateIssuer {
  /** PEM the kube-apiserver trusts for the gateway's serving certificate. */
  caBundlePem: string;
  gatewayUrl: string;
  outDir: string;
  mountDir: string;
  udsName: string;
  udsProxyProtocol: UdsProxyProtocol;
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
  const issued = await issueTenantCertificate(store, tenantId, "caller", o, add);
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
    serial: issued.serial,
    notAfter: issued.notAfter,
    record: issued.record,
  };
}
