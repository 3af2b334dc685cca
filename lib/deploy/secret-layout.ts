/**
 * What the deployment's Secrets Manager secrets hold, shared by the CDK app (cdk/), which creates
 * them and injects their keys into the tasks, `kgw pki`, which writes their values, and
 * `kgw tenant --ca-secret`, which reads the gateway CA back. Every secret is one JSON object of
 * PEM strings under these keys:
 *
 *   secret        keys                                       read by
 *   gateway CA    certificate, privateKey                    the operator only (kgw tenant)
 *   gateway TLS   certificate, privateKey, caCertificate     the tasks: ports 8132 and 8443
 *   peer CA       certificate, privateKey                    the operator only (kgw pki peer)
 *   peer TLS      certificate, privateKey, caCertificate     the tasks: the peer port
 *
 * The gateway TLS secret's caCertificate is the gateway CA's certificate: tenants' client
 * certificates are verified against it, and installed agents verify the gateway with it. The
 * tasks never see a CA key.
 */
import { ConfigError } from "../errors.js";

export const SECRET_KEYS = {
  certificate: "certificate",
  privateKey: "privateKey",
  caCertificate: "caCertificate",
} as const;

export type SecretKey = (typeof SECRET_KEYS)[keyof typeof SECRET_KEYS];

/** A CA secret: the certificate and key that sign (gateway CA, peer CA). */
export interface CaSecretValue {
  certificate: string;
  privateKey: string;
}

/** A TLS secret: a leaf certificate, its key, and the CA the peers are verified against. */
export interface TlsSecretValue extends CaSecretValue {
  caCertificate: string;
}

/**
 * Secrets Manager stores at most 64 KiB per value; a certificate, a key and a CA in PEM are
 * about 3 KiB, so anything near the limit is not one of ours.
 */
export const MAX_SECRET_BYTES = 65_536;

const PEM_LABELS: Readonly<Record<SecretKey, RegExp>> = {
  certificate: /^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n?/,
  caCertificate: /^-----BEGIN CERTIFICATE-----\n[\s\S]+\n-----END CERTIFICATE-----\n?/,
  privateKey: /^-----BEGIN ([A-Z]+ )?PRIVATE KEY-----\n[\s\S]+\n-----END ([A-Z]+ )?PRIVATE KEY-----\n?$/,
};

/** The JSON a CA secret holds; `kgw pki` writes it, `aws secretsmanager put-secret-value` stores it. */
export function caSecretJson(value: CaSecretValue): string {
  return `${JSON.stringify({ [SECRET_KEYS.certificate]: value.certificate, [SECRET_KEYS.privateKey]: value.privateKey }, null, 2)}\n`;
}

export function tlsSecretJson(value: TlsSecretValue): string {
  return `${JSON.stringify(
    {
      [SECRET_KEYS.certificate]: value.certificate,
      [SECRET_KEYS.privateKey]: value.privateKey,
      [SECRET_KEYS.caCertificate]: value.caCertificate,
    },
    null,
    2,
  )}\n`;
}

/**
 * Reads a CA secret's value. `source` names it in errors (its id, never its content): a value
 * that is not ours says which key is missing or not PEM, and never echoes what it found.
 */
export function parseCaSecret(text: string, source: string): CaSecretValue {
  const fields = parseSecretObject(text, source);
  return {
    certificate: pemField(fields, SECRET_KEYS.certificate, source),
    privateKey: pemField(fields, SECRET_KEYS.privateKey, source),
  };
}

function parseSecretObject(text: string, source: string): Record<string, unknown> {
  if (Buffer.byteLength(text) > MAX_SECRET_BYTES) {
    throw new ConfigError(`${source}: the secret is larger than any CA secret (${MAX_SECRET_BYTES} bytes)`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ConfigError(
      `${source}: the secret is not JSON; expected {"${SECRET_KEYS.certificate}": "<PEM>", "${SECRET_KEYS.privateKey}": "<PEM>"} (kgw pki ca writes it)`,
    );
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ConfigError(`${source}: the secret is not a JSON object of PEM strings`);
  }
  return value as Record<string, unknown>;
}

function pemField(fields: Record<string, unknown>, key: SecretKey, source: string): string {
  const v = Object.hasOwn(fields, key) ? fields[key] : undefined;
  if (typeof v !== "string" || v === "") throw new ConfigError(`${source}: the secret has no "${key}"`);
  // Secrets pasted through a console sometimes carry \r\n; PEM parsers take \n.
  const pem = v.replace(/\r\n/g, "\n").trim();
  if (!PEM_LABELS[key].test(`${pem}\n`)) {
    throw new ConfigError(
      `${source}: "${key}" is not ${key === "privateKey" ? "a PEM private key" : "a PEM certificate"}`,
    );
  }
  return `${pem}\n`;
}
