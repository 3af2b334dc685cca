/**
 * Builds TLS server/client settings from PEM files. Files are read once at startup so a missing
 * or unreadable file is a configuration error at boot, not a handshake failure later.
 */
import { readFileSync } from "node:fs";
import type { SecureContextOptions } from "node:tls";
import type { TlsFiles, TlsMinVersion } from "../config/tls.js";
import { ConfigError } from "../errors.js";

export function readPem(path: string, what: string): Buffer {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`${what}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

export interface ServerTlsSettings extends SecureContextOptions {
  minVersion: TlsMinVersion;
  /** Ask for a client certificate; verification outcome is checked by the authenticator. */
  requestCert: boolean;
  rejectUnauthorized: boolean;
}

/**
 * `requireClientCert`: reject handshakes without a certificate signed by `files.ca` (mTLS).
 * Otherwise, when a CA is given, certificates are requested and verified but optional, so that a
 * listener can accept either a certificate or a bearer token.
 */
export function serverTlsSettings(
  files: TlsFiles,
  minVersion: TlsMinVersion,
  requireClientCert: boolean,
  flag: string,
): ServerTlsSettings {
  const hasCa = files.ca !== "";
  return {
    cert: readPem(files.cert, `--${flag}-cert`),
    key: readPem(files.key, `--${flag}-key`),
    ...(hasCa ? { ca: readPem(files.ca, `--${flag}-ca-cert`) } : {}),
    minVersion,
    requestCert: hasCa,
    rejectUnauthorized: hasCa && requireClientCert,
  };
}
