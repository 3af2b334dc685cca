/**
 * Builds TLS server/client settings from PEM files. Files are read once at startup so a missing
 * or unreadable file is a configuration error at boot, not a handshake failure later.
 *
 * Every PEM flag also takes `env:NAME`: the PEM text is in environment variable NAME. That is how
 * ECS hands a task its Secrets Manager values (cdk/), and it keeps keys off the container's disk.
 */

import { constants } from "node:crypto";
import { readFileSync } from "node:fs";
import { DEFAULT_CIPHERS, type SecureContextOptions } from "node:tls";
import type { TlsFiles, TlsMinVersion } from "../config/tls.js";
import { ConfigError } from "../errors.js";
import { withIssuerChain } from "./server-chain.js";

const ENV_SOURCE = "env:";

/** Reads a PEM file, or the variable an `env:NAME` source names; a ConfigError says which. */
export function readPem(path: string, what: string, env: NodeJS.ProcessEnv = process.env): Buffer {
  if (path.startsWith(ENV_SOURCE)) {
    const name = path.slice(ENV_SOURCE.length);
    const text = env[name];
    if (!text) throw new ConfigError(`${what}: environment variable ${name} is empty or not set`);
    // Never echo the value: it may be a private key.
    if (!text.includes("-----BEGIN "))
      throw new ConfigError(`${what}: environment variable ${name} holds no PEM block`);
    return Buffer.from(text, "utf8");
  }
  try {
    return readFileSync(path);
  } catch (err) {
    throw new ConfigError(`${what}: cannot read ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/** TLS 1.3 suites, AES-128-GCM first. */
const TLS13_PREFERENCE = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"];

/**
 * The cipher list our servers choose from, in their order of preference: Node's defaults with
 * AES-128-GCM moved ahead of AES-256-GCM, the order Go's crypto/tls (upstream's server) uses on
 * CPUs with AES instructions. Both are approved TLS 1.3 suites; AES-128 does 10 rounds per block
 * instead of 14, and every tunneled byte passes through three TLS ends in server and agent
 * (docs/PERFORMANCE.md). The TLS 1.2 part of Node's list is kept as it is.
 */
export const SERVER_CIPHERS = [
  ...TLS13_PREFERENCE,
  ...DEFAULT_CIPHERS.split(":").filter((c) => !TLS13_PREFERENCE.includes(c)),
].join(":");

/**
 * No stateless session tickets. By default OpenSSL seals two TLS 1.3 tickets after every full
 * handshake, each an encoding and re-decoding of the session with the client's certificate in it:
 * CPU on every dial (docs/PERFORMANCE.md, "Dials") for resumptions nobody asks for. kube-apiserver
 * and upstream's agents (Go, no ClientSessionCache) and our own agent never resume. With this
 * option OpenSSL sends stateful tickets in TLS 1.3 (a random session id, no encryption); Node keeps
 * no session cache without a 'newSession' listener, so a client that does try to resume gets a
 * full handshake, as on a restarted instance. TLS 1.2 clients get no ticket at all.
 */
const NO_STATELESS_TICKETS = constants.SSL_OP_NO_TICKET;

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
  const ca = files.ca !== "" ? readPem(files.ca, `--${flag}-ca-cert`) : undefined;
  const hasCa = ca !== undefined;
  return {
    cert: withIssuerChain(readPem(files.cert, `--${flag}-cert`), ca),
    key: readPem(files.key, `--${flag}-key`),
    ...(ca ? { ca } : {}),
    minVersion,
    ciphers: SERVER_CIPHERS,
    honorCipherOrder: true,
    secureOptions: NO_STATELESS_TICKETS,
    requestCert: hasCa,
    rejectUnauthorized: hasCa && requireClientCert,
  };
}
