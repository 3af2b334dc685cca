/**
 * The fleet's peer port (lib/fleet/peer/): its flags, parsed and checked here, once;
 * SERVER_FLAGS includes them.
 */
import { ConfigError } from "../errors.js";
import { defineFlags, type FlagValues } from "./flags.js";
import type { TlsFiles } from "./tls.js";

export const PEER_FLAGS = defineFlags({
  "peer-port": {
    kind: "port",
    default: 0,
    help: "Fleet peer port: other gateway instances forward dials here over mTLS (0: off; the fleet uses 8135).",
  },
  "peer-bind-address": { kind: "string", default: "", help: "Peer port bind address (all if empty)." },
  "peer-cert": {
    kind: "string",
    default: "",
    help: "This instance's peer certificate (PEM): serves the peer port and authenticates its own peer links; must carry the URI SAN kgw://fleet/peer.",
  },
  "peer-key": { kind: "string", default: "", help: "Private key of --peer-cert (PEM)." },
  "peer-ca-cert": {
    kind: "string",
    default: "",
    help: "CA of the fleet's peer certificates: both ends of a peer link must chain to it and carry kgw://fleet/peer.",
  },
});

/**
 * The peer port and this instance's peer identity: mTLS both ways, certificates from `tls.ca`
 * carrying the URI SAN kgw://fleet/peer (lib/fleet/peer/peer-identity.ts).
 */
export interface PeerOptions {
  port: number;
  host: string;
  tls: TlsFiles;
}

const PEER_FLAG_NAMES = ["peer-bind-address", "peer-cert", "peer-key", "peer-ca-cert"] as const;

/**
 * The peer port is off unless given a port; when on, it needs all three TLS files: a peer link is
 * always mutual TLS (anyone who can open one can dial as any tenant).
 */
export function parsePeer(f: FlagValues<typeof PEER_FLAGS>): PeerOptions | null {
  if (f["peer-port"] === 0) {
    const stray = PEER_FLAG_NAMES.find((flag) => f[flag]);
    if (stray) throw new ConfigError(`--${stray} needs --peer-port`);
    return null;
  }
  const missing = PEER_FLAG_NAMES.filter((flag) => flag !== "peer-bind-address" && !f[flag]);
  if (missing.length > 0) {
    throw new ConfigError(
      `--peer-port needs ${missing.map((m) => `--${m}`).join(", ")}: peer links are always mutual TLS`,
    );
  }
  return {
    port: f["peer-port"],
    host: f["peer-bind-address"],
    tls: { cert: f["peer-cert"], key: f["peer-key"], ca: f["peer-ca-cert"] },
  };
}
