import { ConfigError } from "../errors.js";

/** Node's names for the TLS versions we allow as a minimum; nothing below 1.2 is ever offered. */
export type TlsMinVersion = "TLSv1.2" | "TLSv1.3";

export interface TlsFiles {
  cert: string;
  key: string;
  /** Client CA; when set, the listener asks for client certificates. */
  ca: string;
}

/** Upstream spells versions as Go constants (`VersionTLS12`). */
export function parseTlsMinVersion(v: string): TlsMinVersion {
  if (v === "VersionTLS12") return "TLSv1.2";
  if (v === "VersionTLS13") return "TLSv1.3";
  throw new ConfigError(`--tls-min-version: "${v}" is not allowed; use VersionTLS12 or VersionTLS13`);
}
