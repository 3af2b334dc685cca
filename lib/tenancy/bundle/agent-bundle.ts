/**
 * What a tenant's agents need to authenticate with a client certificate instead of (or beside)
 * the agent token: a certificate of the gateway CA for the tenant's agent role
 * (`kgw://tenant/<id>/agent`), its key, and the CA bundle that verifies the gateway. The file
 * names are what `kgw agent` is pointed at: `--ca-cert`, `--agent-cert`, `--agent-key`
 * (lib/config/agent-options.ts), under the directory the files are mounted at in the agent's pod.
 *
 * Order of work as for the caller bundle: the output directory, then the certificate and the
 * store (tenant-certificate.ts), then the files.
 */
import path from "node:path";
import type { AddOptions } from "../operations.js";
import type { TenantStore } from "../store.js";
import {
  type CertificateIssuer,
  type WrittenCertificateBundle,
  writeCertificateBundle,
} from "./tenant-certificate.js";

/**
 * Names of the agent bundle's files, keyed by the `kgw agent` flag that takes each. A directory
 * of these makes a Secret with the same keys (`kubectl create secret generic … --from-file=DIR`).
 */
export const AGENT_BUNDLE_FILES = {
  caCert: "ca.crt",
  agentCert: "agent.crt",
  agentKey: "agent.key",
} as const;

const AGENT_FLAG_OF: Readonly<Record<keyof typeof AGENT_BUNDLE_FILES, string>> = {
  caCert: "--ca-cert",
  agentCert: "--agent-cert",
  agentKey: "--agent-key",
};

export interface AgentBundleOptions extends CertificateIssuer {
  /** PEM the agent trusts for the gateway's serving certificate. */
  caBundlePem: string;
  outDir: string;
  /** Where the files will be in the agent's pod: the paths in the printed flags. */
  mountDir: string;
}

export interface WrittenAgentBundle extends WrittenCertificateBundle<keyof typeof AGENT_BUNDLE_FILES> {
  /** The `kgw agent` flags that use the files once mounted at the mount directory. */
  readonly agentFlags: readonly string[];
}

/** `--ca-cert=<mountDir>/ca.crt --agent-cert=… --agent-key=…`, one flag per element. */
export function agentFlags(mountDir: string): string[] {
  return (Object.keys(AGENT_BUNDLE_FILES) as (keyof typeof AGENT_BUNDLE_FILES)[]).map(
    (key) => `${AGENT_FLAG_OF[key]}=${path.posix.join(mountDir, AGENT_BUNDLE_FILES[key])}`,
  );
}

export async function writeAgentBundle(
  store: TenantStore,
  tenantId: string,
  o: AgentBundleOptions,
  add: AddOptions = {},
): Promise<WrittenAgentBundle> {
  const written = await writeCertificateBundle(
    { store, tenantId, role: "agent", issuer: o, add },
    AGENT_BUNDLE_FILES,
    (issued) => ({ caCert: o.caBundlePem, agentCert: issued.certPem, agentKey: issued.keyPem }),
  );
  return { ...written, agentFlags: agentFlags(o.mountDir) };
}
