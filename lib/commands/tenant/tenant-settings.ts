/** What `kgw tenant` hands run-tenant-command.ts for bundles, manifests and install links, built from its flags. */
import path from "node:path";
import type { parseFlags } from "../../config/flags.js";
import { checkSecretId } from "../../deploy/secret-id.js";
import { ConfigError } from "../../errors.js";
import type { UdsProxyProtocol } from "../../tenancy/bundle/egress-selector.js";
import { type GatewayAddress, parseGatewayAddress } from "../../tenancy/bundle/gateway-address.js";
import { MAX_INSTALL_TOKEN_TTL_MS, MIN_INSTALL_TOKEN_TTL_MS } from "../../tenancy/install/install-tokens.js";
import {
  type AgentFlavor,
  checkFlavor,
  checkImage,
  checkNamespace,
  checkReplicas,
} from "../../tenancy/manifest/input.js";

import {
  DEFAULT_AGENT_MOUNT_DIR,
  MAX_CERT_VALIDITY_MS,
  MAX_PATH_LENGTH,
  MIN_CERT_VALIDITY_MS,
  type TENANT_FLAGS,
} from "./tenant-flags.js";

/** What issuing a tenant certificate and writing it out takes, for either role. */
export interface CertificateSettings {
  /** Files of the gateway CA; both "" when it comes from caSecret. */
  caCert: string;
  caKey: string;
  /** The Secrets Manager secret (name or ARN) holding the gateway CA; null: the files. */
  caSecret: string | null;
  /** File with the CA bundle for verifying the gateway; "" with caSecret: the secret's certificate. */
  serverCaBundle: string;
  outDir: string;
  mountDir: string;
  certValidityMs: number;
}

/** The caller bundle: a certificate for kube-apiserver and its egress configurations. */
export interface BundleSettings extends CertificateSettings {
  gateway: GatewayAddress;
  udsName: string;
  udsProxyProtocol: UdsProxyProtocol;
}

/** The agent bundle: a certificate for the tenant's agents, its key and the gateway's CA. */
export type AgentBundleSettings = CertificateSettings;

/** The agent manifest (lib/tenancy/manifest): everything but the token, which is minted for it. */
export interface ManifestSettings {
  /**
   * The CA bundle the agent verifies the gateway with: a file (--server-ca-bundle or --ca-cert),
   * or with --ca-secret the secret whose certificate is the gateway CA.
   */
  caBundle: string;
  caBundleFlag: "--server-ca-bundle" | "--ca-cert" | "--ca-secret";
  gateway: GatewayAddress;
  /** null: standard output. */
  outFile: string | null;
  flavor: AgentFlavor;
  /** undefined: the flavor's default image. */
  image: string | undefined;
  namespace: string;
  replicas: number;
}

/** `install-token`: the link's lifetime and use, and what the printed line needs. */
export interface InstallTokenSettings {
  ttlMs: number;
  singleUse: boolean;
  /** The gateway's public address: the host of the install URL (the gateway port serves it). */
  gateway: GatewayAddress;
  /**
   * The CA file for the `curl --cacert` variant, for a gateway whose certificate is not publicly
   * trusted (--server-ca-bundle, else --ca-cert); null: only the kubectl line is printed.
   */
  caBundle: string | null;
}

export type Values = ReturnType<typeof parseFlags<typeof TENANT_FLAGS>>["values"];

export function bundleSettings(f: Values, tenantId: string): BundleSettings {
  const certificate = certificateSettings(
    f,
    "a caller bundle",
    `kgw-bundle-${tenantId}`,
    f["mount-dir"],
    "; with create, --bundle=false skips it",
  );
  if (!f["gateway-address"]) {
    throw new ConfigError("a caller bundle needs --gateway-address host:port (or $KGW_GATEWAY_ADDRESS)");
  }
  const gateway = parseGatewayAddress(f["gateway-address"]);
  if ("error" in gateway) throw new ConfigError(`--gateway-address: ${gateway.error}`);
  const protocol = f["uds-proxy-protocol"];
  if (protocol !== "GRPC" && protocol !== "HTTPConnect") {
    throw new ConfigError(`--uds-proxy-protocol: "${protocol.slice(0, 40)}" is not GRPC or HTTPConnect`);
  }
  return {
    ...certificate,
    gateway,
    udsName: absolutePosixPath(f["uds-name"], "--uds-name"),
    udsProxyProtocol: protocol,
  };
}

/**
 * The manifest's settings, all checked here (with the generator's own checks) so that a bad flag
 * is refused before a token is minted. It needs the CA bundle but not the CA key: it issues no
 * certificate.
 */
export function manifestSettings(f: Values): ManifestSettings {
  // --server-ca-bundle, then the secret's CA (also from $KGW_CA_SECRET, as the runbook exports
  // it), then --ca-cert: as for certificates (parseTenantCommand clears the secret when CA files
  // are on the command line).
  const caFlag = f["server-ca-bundle"] ? "--server-ca-bundle" : f["ca-secret"] ? "--ca-secret" : "--ca-cert";
  const caBundle = f[caFlag.slice(2) as "server-ca-bundle" | "ca-secret" | "ca-cert"];
  if (!caBundle) {
    throw new ConfigError(
      "a manifest needs the CA bundle that verifies the gateway: --server-ca-bundle, --ca-cert (or $KGW_CA_CERT) or --ca-secret (or $KGW_CA_SECRET)",
    );
  }
  if (!f["gateway-address"]) {
    throw new ConfigError("a manifest needs --gateway-address host:port (or $KGW_GATEWAY_ADDRESS)");
  }
  const gateway = parseGatewayAddress(f["gateway-address"]);
  if ("error" in gateway) throw new ConfigError(`--gateway-address: ${gateway.error}`);
  return {
    caBundle: caFlag === "--ca-secret" ? checkSecretId(caBundle) : requirePath(caBundle, caFlag),
    caBundleFlag: caFlag,
    gateway,
    outFile: f.out === "" ? null : requirePath(f.out, "--out"),
    flavor: asConfig(() => checkFlavor(f["agent-flavor"])),
    image: f["agent-image"] === "" ? undefined : asConfig(() => checkImage(f["agent-image"])),
    namespace: asConfig(() => checkNamespace(f.namespace)),
    replicas: asConfig(() => checkReplicas(f.replicas)),
  };
}

/** Checked here, so a bad --ttl or address is a usage error before anything is written. */
export function installTokenSettings(f: Values): InstallTokenSettings {
  if (f.ttl < MIN_INSTALL_TOKEN_TTL_MS || f.ttl > MAX_INSTALL_TOKEN_TTL_MS) {
    throw new ConfigError(`--ttl must be between 1s and ${MAX_INSTALL_TOKEN_TTL_MS / 3_600_000}h (30 days)`);
  }
  if (!f["gateway-address"]) {
    throw new ConfigError(
      "an install line needs the gateway's public address: --gateway-address host:port (or $KGW_GATEWAY_ADDRESS)",
    );
  }
  const gateway = parseGatewayAddress(f["gateway-address"]);
  if ("error" in gateway) throw new ConfigError(`--gateway-address: ${gateway.error}`);
  const caFlag = f["server-ca-bundle"] ? "--server-ca-bundle" : "--ca-cert";
  const caBundle = f["server-ca-bundle"] || f["ca-cert"];
  return {
    ttlMs: f.ttl,
    singleUse: !f.reusable,
    gateway,
    caBundle: caBundle ? requirePath(caBundle, caFlag) : null,
  };
}

/**
 * The agent bundle's settings. Its own default directory, so that rotating the agent
 * certificate never writes into the caller bundle of the same tenant; its own default mount
 * directory, because it is mounted in a pod, not on a control-plane host.
 */
export function agentBundleSettings(
  f: Values,
  tenantId: string,
  mountDirGiven: boolean,
): AgentBundleSettings {
  return certificateSettings(
    f,
    "an agent bundle",
    `kgw-agent-bundle-${tenantId}`,
    mountDirGiven ? f["mount-dir"] : DEFAULT_AGENT_MOUNT_DIR,
  );
}

export function certificateSettings(
  f: Values,
  what: string,
  defaultOut: string,
  mountDir: string,
  hint = "",
): CertificateSettings {
  if (f["cert-validity"] < MIN_CERT_VALIDITY_MS || f["cert-validity"] > MAX_CERT_VALIDITY_MS) {
    throw new ConfigError("--cert-validity must be between 24h and 5 years (43800h)");
  }
  if (f["ca-secret"]) {
    // CA files left in the environment ($KGW_CA_CERT/$KGW_CA_KEY) are not used; on the command
    // line they were refused by parseTenantCommand.
    return {
      caCert: "",
      caKey: "",
      caSecret: checkSecretId(f["ca-secret"]),
      serverCaBundle: f["server-ca-bundle"] ? requirePath(f["server-ca-bundle"], "--server-ca-bundle") : "",
      outDir: requirePath(f.out || defaultOut, "--out"),
      mountDir: absolutePosixPath(mountDir, "--mount-dir"),
      certValidityMs: f["cert-validity"],
    };
  }
  if (!f["ca-cert"] || !f["ca-key"]) {
    throw new ConfigError(
      `${what} needs the gateway CA: --ca-cert and --ca-key (or $KGW_CA_CERT/$KGW_CA_KEY), or --ca-secret${hint}`,
    );
  }
  return {
    caCert: requirePath(f["ca-cert"], "--ca-cert"),
    caKey: requirePath(f["ca-key"], "--ca-key"),
    caSecret: null,
    serverCaBundle: requirePath(f["server-ca-bundle"] || f["ca-cert"], "--server-ca-bundle"),
    outDir: requirePath(f.out || defaultOut, "--out"),
    mountDir: absolutePosixPath(mountDir, "--mount-dir"),
    certValidityMs: f["cert-validity"],
  };
}

/** A local path: non-empty, bounded, no control characters (it is printed and logged). */
export function requirePath(value: string, flag: string): string {
  if (value === "") throw new ConfigError(`${flag} is required`);
  if (value.length > MAX_PATH_LENGTH || /[\p{Cc}\u2028\u2029]/u.test(value)) {
    throw new ConfigError(`${flag}: not a usable path`);
  }
  return value;
}

/**
 * A path on the kube-apiserver hosts, written into YAML: absolute, POSIX, printable ASCII,
 * normalized (no `..` that would make it mean something else than it reads).
 */
export function absolutePosixPath(value: string, flag: string): string {
  const trimmed = value.length > 1 ? value.replace(/\/+$/, "") : value;
  if (
    !trimmed.startsWith("/") ||
    trimmed.length > MAX_PATH_LENGTH ||
    !/^[\x21-\x7e]+$/.test(trimmed) ||
    path.posix.normalize(trimmed) !== trimmed
  ) {
    throw new ConfigError(`${flag}: expected a normalized absolute path of printable ASCII without spaces`);
  }
  return trimmed;
}

/** DynamoDB's own rule for table names: 3 to 255 of letters, digits, `_`, `-` and `.`. */

/** A validation error from elsewhere, as the configuration error it is here. */
export function asConfig<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}
