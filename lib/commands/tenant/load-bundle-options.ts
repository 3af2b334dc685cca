/**
 * Turns the bundle flags into what writeCallerBundle and writeAgentBundle need: reads and checks
 * the gateway CA and the CA bundle first, so a wrong path fails before any tenant or certificate
 * is made.
 */
import { X509Certificate } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { ConfigError } from "../../errors.js";
import { type CertificateAuthority, loadCa } from "../../pki/ca.js";
import type { AgentBundleOptions } from "../../tenancy/bundle/agent-bundle.js";
import type { CallerBundleOptions } from "../../tenancy/bundle/caller-bundle.js";
import type { AgentBundleSettings, BundleSettings, CertificateSettings } from "./tenant-settings.js";

export async function loadBundleOptions(s: BundleSettings, now: () => Date): Promise<CallerBundleOptions> {
  return {
    ...(await loadCertificateOptions(s, now)),
    gatewayUrl: s.gateway.url,
    udsName: s.udsName,
    udsProxyProtocol: s.udsProxyProtocol,
  };
}

export function loadAgentBundleOptions(s: AgentBundleSettings, now: () => Date): Promise<AgentBundleOptions> {
  return loadCertificateOptions(s, now);
}

async function loadCertificateOptions(s: CertificateSettings, now: () => Date) {
  const [{ certPem, keyPem }, bundleFile] = await Promise.all([
    s.caSecret === null
      ? Promise.all([readPem(s.caCert, "--ca-cert"), readPem(s.caKey, "--ca-key")]).then(([c, k]) => ({
          certPem: c,
          keyPem: k,
        }))
      : readCaSecret(s.caSecret),
    s.serverCaBundle === "" ? Promise.resolve(null) : readPem(s.serverCaBundle, "--server-ca-bundle"),
  ]);
  // With --ca-secret and no --server-ca-bundle, the gateway is verified with the CA itself.
  const caBundlePem = bundleFile ?? certPem;
  let ca: CertificateAuthority;
  try {
    ca = loadCa({ certPem, keyPem });
  } catch (err) {
    throw new ConfigError(
      `${s.caSecret === null ? "--ca-cert/--ca-key" : `--ca-secret ${s.caSecret}`}: ${(err as Error).message}`,
    );
  }
  try {
    new X509Certificate(caBundlePem);
  } catch {
    throw new ConfigError(`--server-ca-bundle: ${s.serverCaBundle} holds no PEM certificate`);
  }
  return {
    ca,
    caBundlePem,
    outDir: s.outDir,
    mountDir: s.mountDir,
    certValidityMs: s.certValidityMs,
    now,
  };
}

/**
 * The gateway CA from Secrets Manager (lib/deploy/ca-secret.ts), with the operator's AWS
 * credentials. Loaded on demand: only --ca-secret pulls in the AWS SDK.
 */
export async function readCaSecret(secretId: string): Promise<{ certPem: string; keyPem: string }> {
  const { readCaFromSecret, secretsManagerReader } = await import("../../deploy/ca-secret.js");
  return readCaFromSecret(secretId, secretsManagerReader());
}

/** PEM files are small; a larger one is a wrong path (a disk image, a log). */
const MAX_PEM_BYTES = 1 << 20;

async function readPem(file: string, flag: string): Promise<string> {
  let text: string;
  try {
    if ((await stat(file)).size > MAX_PEM_BYTES) throw new ConfigError(`${flag}: ${file} is not a PEM file`);
    text = await readFile(file, "utf8");
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`${flag}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
  if (!text.includes("-----BEGIN ")) {
    throw new ConfigError(`${flag}: ${file} is not a PEM file`);
  }
  return text;
}
