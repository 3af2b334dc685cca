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
import type { AddOptions } from "../operations.js";
import type { TenantStore } from "../store.js";
import {
  BUNDLE_FILES,
  tcpEgressConfiguration,
  type UdsProxyProtocol,
  udsEgressConfiguration,
} from "./egress-selector.js";
import {
  type CertificateIssuer,
  type WrittenCertificateBundle,
  writeCertificateBundle,
} from "./tenant-certificate.js";

export interface CallerBundleOptions extends CertificateIssuer {
  /** PEM the kube-apiserver trusts for the gateway's serving certificate. */
  caBundlePem: string;
  gatewayUrl: string;
  outDir: string;
  mountDir: string;
  udsName: string;
  udsProxyProtocol: UdsProxyProtocol;
}

export type WrittenBundle = WrittenCertificateBundle<keyof typeof BUNDLE_FILES>;

export async function writeCallerBundle(
  store: TenantStore,
  tenantId: string,
  o: CallerBundleOptions,
  add: AddOptions = {},
): Promise<WrittenBundle> {
  return writeCertificateBundle(
    { store, tenantId, role: "caller", issuer: o, add },
    BUNDLE_FILES,
    (issued) => ({
      caBundle: o.caBundlePem,
      clientCert: issued.certPem,
      clientKey: issued.keyPem,
      egressTcp: tcpEgressConfiguration({ tenantId, url: o.gatewayUrl, mountDir: o.mountDir }),
      egressUds: udsEgressConfiguration({ tenantId, udsName: o.udsName, proxyProtocol: o.udsProxyProtocol }),
    }),
  );
}
