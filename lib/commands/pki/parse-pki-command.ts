/**
 * Everything `kgw pki` can be told: the subcommands that make the deployment's certificates
 * (docs/DEPLOY.md, "Populate the secrets"), their flags, defaults and validation. The entrypoint
 * calls `parsePkiCommand` once and hands the plain object to run-pki-command.ts.
 */
import { isIP } from "node:net";
import { defineFlags, formatHelp } from "../../config/flags.js";
import { checkSecretId } from "../../deploy/secret-id.js";
import { ConfigError } from "../../errors.js";
import { parseSubcommand } from "../subcommand.js";

const DAY_MS = 86_400_000;
/** Ten years: a CA is replaced by a planned rotation, not by expiry. */
const DEFAULT_CA_VALIDITY_MS = 3650 * DAY_MS;
/** A year: leaves are rotated with the runbook's rolling deployment. */
const DEFAULT_LEAF_VALIDITY_MS = 365 * DAY_MS;
const MAX_VALIDITY_MS = 20 * 365 * DAY_MS;
/** A certificate names a handful of hosts; more is a mistake in the list. */
const MAX_NAMES = 32;

export const PKI_FLAGS = defineFlags({
  out: {
    kind: "string",
    default: "",
    help: "Directory the PEM files and the secret's JSON are written to (created 0700).",
  },
  "common-name": {
    kind: "string",
    default: "",
    help: "Subject CN (ca: kgw gateway CA, or kgw peer CA with --peer).",
  },
  peer: {
    kind: "bool",
    default: false,
    help: "ca: name it the peer CA (a CA of its own for the links between gateway tasks).",
  },
  validity: {
    kind: "duration",
    default: 0,
    help: "How long the certificate is valid (ca: 87600h, ten years; serving and peer: 8760h, capped at the CA's expiry).",
  },
  "ca-cert": {
    kind: "string",
    default: "",
    help: "serving, peer: the signing CA's certificate (PEM).",
    env: "KGW_CA_CERT",
  },
  "ca-key": {
    kind: "string",
    default: "",
    help: "serving, peer: the signing CA's private key (PEM).",
    env: "KGW_CA_KEY",
  },
  "ca-secret": {
    kind: "string",
    default: "",
    // No environment variable: the runbook exports KGW_CA_SECRET for kgw tenant (the gateway CA),
    // and `kgw pki peer` must never sign with it by accident.
    help: "serving, peer: the signing CA from AWS Secrets Manager instead of --ca-cert/--ca-key: the secret name or ARN (GatewayCaSecretArn for serving, PeerCaSecretArn for peer), read with your own AWS credentials.",
  },
  "ca-bundle": {
    kind: "string",
    default: "",
    help: "serving, peer: the CA certificates (PEM, one or more) written as the secret's caCertificate, what the tasks trust; during a CA rotation the old and the new CA (default: the signing CA's certificate).",
  },
  "dns-names": {
    kind: "string",
    default: "",
    help: "serving: comma-separated DNS names the gateway is reached by (the deployment's kgw:domainName).",
  },
  "ip-addresses": {
    kind: "string",
    default: "",
    help: "serving: comma-separated IP addresses, if clients dial one.",
  },
});

type FlagName = keyof typeof PKI_FLAGS;
export type PkiSubcommand = "ca" | "serving" | "peer";

const SUBCOMMANDS: Record<PkiSubcommand, { summary: string; flags: readonly FlagName[] }> = {
  ca: {
    summary:
      "create a CA: ca.pem, ca-key.pem (0600) and ca-secret.json for the gateway CA or, with --peer, the peer CA secret",
    flags: ["out", "common-name", "peer", "validity"],
  },
  serving: {
    summary:
      "issue the gateway's serving certificate (ports 8132 and 8443): tls.pem, tls-key.pem and tls-secret.json for the gateway TLS secret",
    flags: [
      "out",
      "ca-cert",
      "ca-key",
      "ca-secret",
      "ca-bundle",
      "dns-names",
      "ip-addresses",
      "validity",
      "common-name",
    ],
  },
  peer: {
    summary:
      "issue the peer certificate (URI SAN kgw://fleet/peer, client and server): peer.pem, peer-key.pem and tls-secret.json for the peer TLS secret",
    flags: ["out", "ca-cert", "ca-key", "ca-secret", "ca-bundle", "validity"],
  },
};

/** Where the signing CA comes from, and what the TLS secret trusts. */
export interface SigningCa {
  /** Files of the CA; both "" when it comes from caSecret. */
  caCert: string;
  caKey: string;
  /** The Secrets Manager secret (name or ARN) holding the CA; null: the files. */
  caSecret: string | null;
  /** File of the CA certificates written as caCertificate; "": the signing CA's certificate. */
  caBundle: string;
}

export type PkiCommand =
  | { name: "ca"; outDir: string; commonName: string; validityDays: number; peer: boolean }
  | ({
      name: "serving";
      outDir: string;
      commonName: string;
      dnsNames: string[];
      ipAddresses: string[];
      validityDays: number;
    } & SigningCa)
  | ({ name: "peer"; outDir: string; validityDays: number } & SigningCa);

export type ParsedPkiCommand = { help: true; text: string } | { help: false; command: PkiCommand };

export function parsePkiCommand(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedPkiCommand {
  const first = parseSubcommand(PKI_FLAGS, SUBCOMMANDS, pkiHelp, argv, env);
  if (first.help) return first;
  const { name, args: rest, parsed } = first;
  if (rest.length > 0) throw new ConfigError(`usage: kgw pki ${name} [flags]`);
  for (const flag of parsed.onCommandLine) {
    if (!SUBCOMMANDS[name].flags.includes(flag))
      throw new ConfigError(`--${flag} does not apply to kgw pki ${name}`);
  }
  const f = parsed.values;
  if (!f.out) throw new ConfigError("--out is required: the directory the files are written to");
  const validity = (fallback: number): number => {
    const ms = f.validity || fallback;
    if (ms < DAY_MS || ms > MAX_VALIDITY_MS)
      throw new ConfigError("--validity must be between 24h and 20 years");
    return ms / DAY_MS;
  };
  const signing = (): SigningCa => {
    const caBundle = f["ca-bundle"];
    if (f["ca-secret"]) {
      // CA files left in the environment ($KGW_CA_CERT/$KGW_CA_KEY) are not used; on the
      // command line they name a second CA.
      if (parsed.onCommandLine.has("ca-cert") || parsed.onCommandLine.has("ca-key")) {
        throw new ConfigError("--ca-secret and --ca-cert/--ca-key name two CAs: give one");
      }
      return { caCert: "", caKey: "", caSecret: checkSecretId(f["ca-secret"]), caBundle };
    }
    if (!f["ca-cert"] || !f["ca-key"]) {
      throw new ConfigError(
        `kgw pki ${name} needs the signing CA: --ca-cert and --ca-key (kgw pki ca wrote them), or --ca-secret`,
      );
    }
    return { caCert: f["ca-cert"], caKey: f["ca-key"], caSecret: null, caBundle };
  };
  switch (name) {
    case "ca":
      return {
        help: false,
        command: {
          name,
          outDir: f.out,
          commonName: f["common-name"] || (f.peer ? "kgw peer CA" : "kgw gateway CA"),
          validityDays: validity(DEFAULT_CA_VALIDITY_MS),
          peer: f.peer,
        },
      };
    case "serving": {
      const dnsNames = list(f["dns-names"]);
      const ipAddresses = list(f["ip-addresses"]);
      if (dnsNames.length === 0 && ipAddresses.length === 0) {
        throw new ConfigError(
          "--dns-names is required: the name agents and kube-apiservers dial (kgw:domainName)",
        );
      }
      if (dnsNames.length + ipAddresses.length > MAX_NAMES)
        throw new ConfigError(`at most ${MAX_NAMES} names`);
      for (const ip of ipAddresses)
        if (isIP(ip) === 0) throw new ConfigError(`--ip-addresses: "${ip}" is not an IP address`);
      for (const dns of dnsNames) {
        if (isIP(dns) !== 0)
          throw new ConfigError(`--dns-names: "${dns}" is an IP address; use --ip-addresses`);
      }
      return {
        help: false,
        command: {
          name,
          outDir: f.out,
          commonName: f["common-name"] || dnsNames[0] || ipAddresses[0]!,
          dnsNames,
          ipAddresses,
          validityDays: validity(DEFAULT_LEAF_VALIDITY_MS),
          ...signing(),
        },
      };
    }
    case "peer":
      return {
        help: false,
        command: { name, outDir: f.out, validityDays: validity(DEFAULT_LEAF_VALIDITY_MS), ...signing() },
      };
  }
}

const list = (v: string): string[] =>
  v
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");

/** Every subcommand's name, from the table that dispatches them (the help texts are checked against it). */
export const PKI_SUBCOMMANDS = Object.keys(SUBCOMMANDS) as readonly PkiSubcommand[];

export function pkiHelp(sub?: PkiSubcommand): string {
  if (sub) {
    const flags = Object.fromEntries(SUBCOMMANDS[sub].flags.map((n) => [n, PKI_FLAGS[n]] as const));
    return formatHelp(`kgw pki ${sub} [flags]`, SUBCOMMANDS[sub].summary, flags);
  }
  const rows = Object.entries(SUBCOMMANDS).map(([n, s]) => `  ${n.padEnd(10)} ${s.summary}`);
  return formatHelp(
    "kgw pki <subcommand> [flags]",
    `Makes the certificates of an AWS deployment (docs/DEPLOY.md); each writes the JSON its Secrets Manager secret holds.\n\nSubcommands:\n${rows.join("\n")}`,
    PKI_FLAGS,
  );
}
