/**
 * `kgw pki …`: carries out one parsed command (parse-pki-command.ts) with lib/pki and writes the PEM
 * files and the secret's JSON (lib/deploy/secret-layout.ts) with lib/pki/files.ts's atomic writes: keys
 * and every file that holds one are 0600, in a directory created 0700.
 */
import { X509Certificate } from "node:crypto";
import { readFile } from "node:fs/promises";
import { caSecretJson, tlsSecretJson } from "../../deploy/secret-layout.js";
import { ConfigError, GatewayError } from "../../errors.js";
import { PEER_IDENTITY_URI } from "../../fleet/peer/peer-identity.js";
import { type CertificateAuthority, createCa, loadCa } from "../../pki/ca.js";
import { writePemFiles } from "../../pki/files.js";
import { exitCodeFor } from "../exit-codes.js";
import type { PkiCommand, SigningCa } from "./parse-pki-command.js";

export interface PkiCliIo {
  out(text: string): void;
  err(text: string): void;
}

/** Exit codes (lib/commands/exit-codes.ts): 0 done, 1 failed (a file could not be written), 2 bad usage or input. */
export async function runPkiCommand(command: PkiCommand, io: PkiCliIo): Promise<number> {
  try {
    const written = await execute(command);
    io.out(`${written.map((p) => `wrote ${p}`).join("\n")}\n`);
    return 0;
  } catch (err) {
    if (err instanceof GatewayError) {
      io.err(`kgw pki ${command.name}: ${err.message}\n`);
      return exitCodeFor(err);
    }
    const code = (err as NodeJS.ErrnoException).code;
    if (code) {
      io.err(`kgw pki ${command.name}: ${(err as Error).message}\n`);
      return 1;
    }
    throw err;
  }
}

async function execute(command: PkiCommand): Promise<string[]> {
  switch (command.name) {
    case "ca": {
      const ca = await createCa({ commonName: command.commonName, validityDays: command.validityDays });
      const files = await writePemFiles(command.outDir, {
        "ca.pem": ca.certPem,
        "ca-key.pem": ca.keyPem,
        // Holds the key: written 0600 (files.ts recognises the PEM inside).
        "ca-secret.json": caSecretJson({ certificate: ca.certPem, privateKey: ca.keyPem }),
      });
      return Object.values(files);
    }
    case "serving": {
      const ca = await loadSigningCa(command);
      const leaf = await ca.issue({
        commonName: command.commonName,
        dnsNames: command.dnsNames,
        ipAddresses: command.ipAddresses,
        usage: "server",
        validityDays: command.validityDays,
      });
      return writeLeaf(command.outDir, "tls", leaf, await trustBundle(command, ca));
    }
    case "peer": {
      const ca = await loadSigningCa(command);
      // Client and server: each end of a peer link presents it. No host name: tasks come and go
      // at addresses the registry hands out, and both ends check the URI (lib/fleet/peer).
      const leaf = await ca.issue({
        commonName: "kgw fleet peer",
        uris: [PEER_IDENTITY_URI],
        usage: "both",
        validityDays: command.validityDays,
      });
      return writeLeaf(command.outDir, "peer", leaf, await trustBundle(command, ca));
    }
  }
}

/** A leaf's certificate and key (NAME.pem, NAME-key.pem) and its TLS secret's JSON, with what it trusts. */
async function writeLeaf(
  outDir: string,
  name: "tls" | "peer",
  leaf: { certPem: string; keyPem: string },
  caCertificate: string,
): Promise<string[]> {
  const files = await writePemFiles(outDir, {
    [`${name}.pem`]: leaf.certPem,
    [`${name}-key.pem`]: leaf.keyPem,
    "tls-secret.json": tlsSecretJson({
      certificate: leaf.certPem,
      privateKey: leaf.keyPem,
      caCertificate,
    }),
  });
  return Object.values(files);
}

const read = async (file: string, flag: string) => {
  try {
    return await readFile(file, "utf8");
  } catch (err) {
    throw new ConfigError(`${flag}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
};

async function loadSigningCa(s: SigningCa): Promise<CertificateAuthority> {
  if (s.caSecret !== null) return loadCa(await readSigningCaSecret(s.caSecret));
  // One after the other: when both are unreadable, the error names the first flag every time
  // (two reads at once fail in whichever order the disk answers).
  const certPem = await read(s.caCert, "--ca-cert");
  const keyPem = await read(s.caKey, "--ca-key");
  try {
    return loadCa({ certPem, keyPem });
  } catch (err) {
    throw new ConfigError(`--ca-cert/--ca-key: ${(err as Error).message}`);
  }
}

/**
 * The signing CA from Secrets Manager (lib/deploy/ca-secret.ts checks it is a CA with its key),
 * with the operator's AWS credentials. Loaded on demand: only --ca-secret pulls in the AWS SDK.
 */
async function readSigningCaSecret(secretId: string): Promise<{ certPem: string; keyPem: string }> {
  const { readCaFromSecret, secretsManagerReader } = await import("../../deploy/ca-secret.js");
  return readCaFromSecret(secretId, secretsManagerReader());
}

/**
 * The TLS secret's caCertificate: the signing CA's certificate, or --ca-bundle's certificates,
 * which must include it (installed agents verify the gateway, and tasks their peers, with it).
 */
async function trustBundle(s: SigningCa, ca: CertificateAuthority): Promise<string> {
  if (s.caBundle === "") return ca.certPem;
  const certs = pemCertificates(await read(s.caBundle, "--ca-bundle"));
  if (certs.length === 0) throw new ConfigError(`--ca-bundle: ${s.caBundle} holds no PEM certificate`);
  let parsed: X509Certificate[];
  try {
    parsed = certs.map((pem) => new X509Certificate(pem));
  } catch {
    throw new ConfigError(`--ca-bundle: ${s.caBundle} holds a certificate that cannot be read`);
  }
  const signer = new X509Certificate(ca.certPem);
  if (!parsed.some((c) => c.fingerprint256 === signer.fingerprint256)) {
    throw new ConfigError(
      `--ca-bundle: ${s.caBundle} does not include the signing CA (${signer.subject.replace(/\n/g, ", ")}); add it, or the gateway's own certificate is not trusted`,
    );
  }
  if (parsed.some((c) => !c.ca))
    throw new ConfigError(`--ca-bundle: ${s.caBundle} holds a certificate that is not a CA`);
  return certs.join("");
}

/** The certificates of a PEM bundle, each with its own trailing newline. */
function pemCertificates(text: string): string[] {
  return (text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (p) => `${p}\n`,
  );
}
