/**
 * Everything `kgw tenant` can be told, in one place: the subcommands, the flag table, which flags
 * each subcommand takes, defaults and validation. The entrypoint calls `parseTenantCommand` once
 * and hands the plain object to lib/tenancy/cli.
 */
import path from "node:path";
import { checkSecretId } from "../deploy/secret-id.js";
import { DEFAULT_EGRESS_POLICY, type EgressPolicy, validateEgressPolicy } from "../egress/egress-policy.js";
import { ConfigError } from "../errors.js";
import type { UdsProxyProtocol } from "../tenancy/bundle/egress-selector.js";
import { type GatewayAddress, parseGatewayAddress } from "../tenancy/bundle/gateway-address.js";
import {
  DEFAULT_INSTALL_TOKEN_TTL_MS,
  MAX_INSTALL_TOKEN_TTL_MS,
  MIN_INSTALL_TOKEN_TTL_MS,
} from "../tenancy/install/install-tokens.js";
import {
  DEFAULT_CERT_VALIDITY_MS,
  DEFAULT_ROTATION_GRACE_MS,
  MAX_ROTATION_GRACE_MS,
} from "../tenancy/limits.js";
import { DEFAULT_KGW_AGENT_IMAGE, DEFAULT_UPSTREAM_AGENT_IMAGE } from "../tenancy/manifest/images.js";
import {
  type AgentFlavor,
  checkFlavor,
  checkImage,
  checkNamespace,
  checkReplicas,
  DEFAULT_NAMESPACE,
  DEFAULT_REPLICAS,
} from "../tenancy/manifest/input.js";
import { CREDENTIAL_KINDS, type CredentialKind } from "../tenancy/model.js";
import { type QuotaName, validateQuotas } from "../tenancy/quotas.js";
import { checkTenantId } from "../tenancy/tenant-id.js";
import { defineFlags, formatHelp, parseFlags } from "./flags.js";

/** Where the bundle is mounted on control-plane nodes unless told otherwise. */
const DEFAULT_MOUNT_DIR = "/etc/kubernetes/kgw";
/** Where the agent bundle is mounted in the agent's pod unless told otherwise (a Secret volume). */
const DEFAULT_AGENT_MOUNT_DIR = "/etc/kgw-agent";
/** The socket path of the Kubernetes documentation's konnectivity-server example. */
const DEFAULT_UDS_NAME = "/etc/kubernetes/konnectivity-server/konnectivity-server.socket";
/** Paths end up in YAML and on other machines: long or odd ones are mistakes, not needs. */
const MAX_PATH_LENGTH = 1024;
/** A client certificate outliving five years is one nobody will remember to rotate. */
const MAX_CERT_VALIDITY_MS = 5 * 365 * 86_400_000;
/** Shorter than a day and the bundle expires before it is deployed. */
const MIN_CERT_VALIDITY_MS = 86_400_000;

export const TENANT_FLAGS = defineFlags({
  "store-dir": {
    kind: "string",
    default: "",
    help: "Directory of the tenant store (created by the first create).",
    env: "KGW_TENANT_STORE_DIR",
  },
  table: {
    kind: "string",
    default: "",
    help: "DynamoDB table of the tenant store, instead of --store-dir (region, endpoint and credentials: the AWS SDK's standard configuration, e.g. AWS_REGION, AWS_ENDPOINT_URL_DYNAMODB).",
    env: "KGW_TENANT_TABLE",
  },
  output: { kind: "string", default: "text", help: "Output format: text or json." },
  "display-name": { kind: "string", default: "", help: "create: a name for people (default: the id)." },
  "caller-token": {
    kind: "bool",
    default: false,
    help: "create: also issue a caller token (CONNECT Proxy-Authorization, for non-Kubernetes callers).",
  },
  bundle: { kind: "bool", default: true, help: "create: also issue and write the caller bundle." },
  all: { kind: "bool", default: false, help: "list: include deleted tenants." },
  credential: {
    kind: "string",
    default: "agent-token",
    help: "rotate: which credential: agent-token, agent-certificate, caller-token or caller-certificate.",
  },
  grace: {
    kind: "duration",
    default: DEFAULT_ROTATION_GRACE_MS,
    help: "rotate: how long the credentials rotated out stay valid.",
  },
  "ca-cert": { kind: "string", default: "", help: "Gateway CA certificate (PEM).", env: "KGW_CA_CERT" },
  "ca-key": { kind: "string", default: "", help: "Gateway CA private key (PEM).", env: "KGW_CA_KEY" },
  "ca-secret": {
    kind: "string",
    default: "",
    help: "The gateway CA from AWS Secrets Manager instead of --ca-cert/--ca-key: a secret name or ARN holding {certificate, privateKey} (kgw pki ca's ca-secret.json), read with your own AWS credentials.",
    env: "KGW_CA_SECRET",
  },
  "server-ca-bundle": {
    kind: "string",
    default: "",
    help: "CA bundle kube-apiserver (or the agent) verifies the gateway's serving certificate with (default: --ca-cert).",
  },
  "gateway-address": {
    kind: "string",
    default: "",
    help: "host:port kube-apiserver (and, in a manifest, the agent) dials (must match the gateway's serving certificate).",
    env: "KGW_GATEWAY_ADDRESS",
  },
  out: {
    kind: "string",
    default: "",
    help: "Directory the bundle is written to (default ./kgw-bundle-<tenant>; an agent bundle ./kgw-agent-bundle-<tenant>); manifest: the YAML file, written 0600 (default: standard output).",
  },
  "mount-dir": {
    kind: "string",
    default: DEFAULT_MOUNT_DIR,
    help: `Where the bundle's files will be on the kube-apiserver hosts (paths in the YAML); for an agent bundle, in the agent's pod (default ${DEFAULT_AGENT_MOUNT_DIR}).`,
  },
  "uds-name": {
    kind: "string",
    default: DEFAULT_UDS_NAME,
    help: "Socket path for the Unix socket variant of the egress configuration.",
  },
  "uds-proxy-protocol": {
    kind: "string",
    default: "GRPC",
    help: "Protocol of the Unix socket variant: GRPC or HTTPConnect.",
  },
  "cert-validity": {
    kind: "duration",
    default: DEFAULT_CERT_VALIDITY_MS,
    help: "Validity of a caller or agent certificate (capped at the CA's own expiry).",
  },
  "agent-flavor": {
    kind: "string",
    default: "kgw",
    help: "manifest: which agent the Deployment runs: kgw (ours) or upstream (proxy-agent).",
  },
  "agent-image": {
    kind: "string",
    default: "",
    help: `manifest: the agent's image, with a tag or digest (default ${DEFAULT_KGW_AGENT_IMAGE}; upstream flavor ${DEFAULT_UPSTREAM_AGENT_IMAGE}).`,
  },
  namespace: {
    kind: "string",
    default: DEFAULT_NAMESPACE,
    help: "manifest: namespace of the agent's objects.",
  },
  replicas: { kind: "int", default: DEFAULT_REPLICAS, help: "manifest: replicas of the agent's Deployment." },
  "max-tunnels": { kind: "int", default: 0, help: "quota: tunnels open at once (0: the server's default)." },
  "dial-rate": {
    kind: "int",
    default: 0,
    help: "quota: dials per second, sustained (0: the server's default).",
  },
  "dial-burst": {
    kind: "int",
    default: 0,
    help: "quota: dials at once above the rate (0: the server's default).",
  },
  "max-agents": { kind: "int", default: 0, help: "quota: agent streams at once (0: the server's default)." },
  "max-buffered-mib": {
    kind: "int",
    default: 0,
    help: "quota: MiB of tunneled bytes held at once, its tunnels' windows (0: the server's default).",
  },
  set: {
    kind: "bool",
    default: false,
    help: "policy: replace the egress policy with the RULEs given (none: allow nothing).",
  },
  default: { kind: "bool", default: false, help: "policy: reset the egress policy to the default." },
  "allow-loopback": {
    kind: "bool",
    default: false,
    help: "policy --set, create: let dials reach the agent host's loopback addresses.",
  },
  "allow-link-local": {
    kind: "bool",
    default: false,
    help: "policy --set, create: let dials reach link-local addresses, cloud metadata services included.",
  },
  ttl: {
    kind: "duration",
    default: DEFAULT_INSTALL_TOKEN_TTL_MS,
    help: "install-token: how long the install link works (at most 30 days, 720h).",
  },
  reusable: {
    kind: "bool",
    default: false,
    help: "install-token: the link works until it expires, not only for its first fetch (each fetch mints a new agent token).",
  },
});

type FlagName = keyof typeof TENANT_FLAGS;
export type TenantSubcommand =
  | "create"
  | "list"
  | "show"
  | "rotate"
  | "revoke"
  | "delete"
  | "bundle"
  | "manifest"
  | "install-token"
  | "policy"
  | "quota";
export type OutputFormat = "text" | "json";

const BUNDLE_FLAGS: readonly FlagName[] = [
  "ca-cert",
  "ca-key",
  "ca-secret",
  "server-ca-bundle",
  "gateway-address",
  "out",
  "mount-dir",
  "uds-name",
  "uds-proxy-protocol",
  "cert-validity",
];

/** Bundle flags that only the caller bundle (kube-apiserver's egress configuration) uses. */
const CALLER_ONLY_BUNDLE_FLAGS: readonly FlagName[] = ["gateway-address", "uds-name", "uds-proxy-protocol"];

const SUBCOMMANDS: Record<
  TenantSubcommand,
  { args: string[]; summary: string; flags: readonly FlagName[]; moreArgs?: true }
> = {
  create: {
    args: ["TENANT"],
    summary: "create a tenant; prints its agent token once and writes its caller bundle",
    flags: ["display-name", "caller-token", "bundle", "allow-loopback", "allow-link-local", ...BUNDLE_FLAGS],
  },
  list: { args: [], summary: "list tenants (no secrets)", flags: ["all"] },
  show: { args: ["TENANT"], summary: "show a tenant and its credentials (no secrets)", flags: [] },
  rotate: {
    args: ["TENANT"],
    summary:
      "issue a new credential (a certificate as a bundle); the old ones of that kind stay valid for --grace",
    flags: ["credential", "grace", ...BUNDLE_FLAGS],
  },
  revoke: { args: ["TENANT", "CREDENTIAL_ID"], summary: "refuse a credential from now on", flags: [] },
  delete: { args: ["TENANT"], summary: "delete a tenant: all its credentials stop working", flags: [] },
  bundle: {
    args: ["TENANT"],
    summary: "issue a caller certificate and write the control plane's bundle",
    flags: BUNDLE_FLAGS,
  },
  manifest: {
    args: ["TENANT"],
    summary:
      "print the agent's Kubernetes manifest (kubectl apply -f); mints a new agent token for it, since stored tokens are hashed and cannot be printed again (the other agent tokens stay valid)",
    flags: [
      "ca-cert",
      "server-ca-bundle",
      "gateway-address",
      "out",
      "agent-flavor",
      "agent-image",
      "namespace",
      "replicas",
    ],
  },
  "install-token": {
    args: ["TENANT"],
    summary:
      "issue an install link and print the one line that installs the agent (kubectl apply -f https://<gateway>/v1/install/<token>.yaml); single use unless --reusable, valid for --ttl",
    flags: ["ttl", "reusable", "gateway-address", "server-ca-bundle", "ca-cert"],
  },
  policy: {
    args: ["TENANT"],
    moreArgs: true,
    summary:
      "show the tenant's egress policy; with --set RULE..., replace it (rules: 10.0.0.0/8, 10.0.0.0/8:443,10250, [fd00::/8]:443, *.svc.cluster.local:443, *); --default resets it",
    flags: ["set", "default", "allow-loopback", "allow-link-local"],
  },
  quota: {
    args: ["TENANT"],
    summary:
      "show the tenant's quota overrides; --max-tunnels, --dial-rate, --dial-burst, --max-agents set them per instance (0: back to the server's default)",
    flags: ["max-tunnels", "dial-rate", "dial-burst", "max-agents", "max-buffered-mib"],
  },
};
const COMMON_FLAGS: readonly FlagName[] = ["store-dir", "table", "output"];

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
  /** File with the CA bundle the agent verifies the gateway with (--server-ca-bundle or --ca-cert). */
  caBundle: string;
  caBundleFlag: "--server-ca-bundle" | "--ca-cert";
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

interface Common {
  storeDir: string;
  /** The DynamoDB table of the store; when set, storeDir is unused. */
  table: string | undefined;
  output: OutputFormat;
}

export type TenantCommand =
  | (Common & {
      name: "create";
      tenantId: string;
      displayName: string | undefined;
      callerToken: boolean;
      bundle: BundleSettings | null;
      /** The default egress policy with --allow-loopback / --allow-link-local, or null: the default. */
      egress: EgressPolicy | null;
    })
  | (Common & { name: "list"; all: boolean })
  | (Common & { name: "show"; tenantId: string })
  | (Common & {
      name: "rotate";
      tenantId: string;
      credential: CredentialKind;
      graceMs: number;
      /** Set when rotating the caller certificate: the new one is written as a bundle. */
      bundle: BundleSettings | null;
      /** Set when rotating the agent certificate: the new one is written as an agent bundle. */
      agentBundle: AgentBundleSettings | null;
    })
  | (Common & { name: "revoke"; tenantId: string; credentialId: string })
  | (Common & { name: "delete"; tenantId: string })
  | (Common & { name: "bundle"; tenantId: string; bundle: BundleSettings })
  | (Common & { name: "manifest"; tenantId: string; manifest: ManifestSettings })
  | (Common & { name: "install-token"; tenantId: string; install: InstallTokenSettings })
  /** `change`: null shows the policy; "default" resets it; a policy replaces it. */
  | (Common & { name: "policy"; tenantId: string; change: EgressPolicy | "default" | null })
  /** `changes`: the quotas given (null: back to the server's default); empty shows them. */
  | (Common & { name: "quota"; tenantId: string; changes: Partial<Record<QuotaName, number | null>> });

export type ParsedTenantCommand = { help: true; text: string } | { help: false; command: TenantCommand };

export function parseTenantCommand(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedTenantCommand {
  const parsed = parseFlags(TENANT_FLAGS, argv, env, { allowPositionals: true });
  const [sub, ...args] = parsed.positionals;
  if (sub === undefined || sub === "help") return { help: true, text: tenantHelp() };
  if (!Object.hasOwn(SUBCOMMANDS, sub)) {
    throw new ConfigError(
      `unknown subcommand "${sub.slice(0, 40)}" (one of ${Object.keys(SUBCOMMANDS).join(", ")})`,
    );
  }
  const name = sub as TenantSubcommand;
  const spec = SUBCOMMANDS[name];
  if (parsed.help) return { help: true, text: tenantHelp(name) };
  // Only flags from the command line: an environment variable set for other subcommands is fine.
  for (const flag of parsed.onCommandLine) {
    if (!COMMON_FLAGS.includes(flag) && !spec.flags.includes(flag)) {
      throw new ConfigError(`--${flag} does not apply to kgw tenant ${name}`);
    }
  }
  if (spec.moreArgs ? args.length < spec.args.length : args.length !== spec.args.length) {
    throw new ConfigError(`usage: kgw tenant ${name} ${spec.args.join(" ")}`.trimEnd());
  }
  const f = parsed.values;
  if (
    parsed.onCommandLine.has("ca-secret") &&
    (parsed.onCommandLine.has("ca-cert") || parsed.onCommandLine.has("ca-key"))
  ) {
    throw new ConfigError("--ca-secret and --ca-cert/--ca-key name two CAs: give one");
  }
  if (parsed.onCommandLine.has("store-dir") && parsed.onCommandLine.has("table")) {
    throw new ConfigError("--store-dir and --table name two different stores: give one");
  }
  // --table wins over a KGW_TENANT_STORE_DIR left in the environment.
  const table = f.table === "" ? undefined : dynamoTableName(f.table);
  const common: Common = {
    storeDir: table ? f["store-dir"] : requirePath(f["store-dir"], "--store-dir"),
    table,
    output: outputFormat(f.output),
  };
  const tenantId = () => asConfig(() => checkTenantId(args[0]));
  const bundle = (tenant: string) => bundleSettings(f, tenant);

  switch (name) {
    case "create": {
      const id = tenantId();
      return ok({
        ...common,
        name,
        tenantId: id,
        displayName: f["display-name"] === "" ? undefined : f["display-name"],
        callerToken: f["caller-token"],
        bundle: f.bundle ? bundle(id) : null,
        egress:
          f["allow-loopback"] || f["allow-link-local"]
            ? {
                ...DEFAULT_EGRESS_POLICY,
                allowLoopback: f["allow-loopback"],
                allowLinkLocal: f["allow-link-local"],
              }
            : null,
      });
    }
    case "list":
      return ok({ ...common, name, all: f.all });
    case "show":
    case "delete":
      return ok({ ...common, name, tenantId: tenantId() });
    case "revoke":
      return ok({ ...common, name, tenantId: tenantId(), credentialId: credentialId(args[1]!) });
    case "rotate": {
      const id = tenantId();
      const credential = parseCredentialKind(f.credential);
      if (f.grace > MAX_ROTATION_GRACE_MS) {
        throw new ConfigError(`--grace must be at most ${MAX_ROTATION_GRACE_MS / 86_400_000} days`);
      }
      const given = BUNDLE_FLAGS.find((b) => parsed.onCommandLine.has(b));
      if (credential.endsWith("-token") && given) {
        throw new ConfigError(
          `--${given} applies to --credential=caller-certificate or agent-certificate only (a token has no bundle)`,
        );
      }
      const callerOnly = CALLER_ONLY_BUNDLE_FLAGS.find((b) => parsed.onCommandLine.has(b));
      if (credential === "agent-certificate" && callerOnly) {
        throw new ConfigError(`--${callerOnly} applies to the caller bundle only, not to an agent bundle`);
      }
      return ok({
        ...common,
        name,
        tenantId: id,
        credential,
        graceMs: f.grace,
        bundle: credential === "caller-certificate" ? bundle(id) : null,
        agentBundle:
          credential === "agent-certificate"
            ? agentBundleSettings(f, id, parsed.onCommandLine.has("mount-dir"))
            : null,
      });
    }
    case "bundle": {
      const id = tenantId();
      return ok({ ...common, name, tenantId: id, bundle: bundle(id) });
    }
    case "manifest":
      return ok({ ...common, name, tenantId: tenantId(), manifest: manifestSettings(f) });
    case "install-token":
      return ok({ ...common, name, tenantId: tenantId(), install: installTokenSettings(f) });
    case "quota": {
      const changes: Partial<Record<QuotaName, number | null>> = {};
      for (const [flag, quota] of QUOTA_FLAGS) {
        if (!parsed.onCommandLine.has(flag)) continue;
        const v = f[flag];
        changes[quota] = v === 0 ? null : v;
      }
      // Checked here, so bad input is a usage error before the store is opened.
      asConfig(() =>
        validateQuotas(Object.fromEntries(Object.entries(changes).filter(([, v]) => v !== null))),
      );
      return ok({ ...common, name, tenantId: tenantId(), changes });
    }
    case "policy":
      return ok({
        ...common,
        name,
        tenantId: tenantId(),
        change: policyChange(f, args.slice(1), parsed.onCommandLine),
      });
  }
}

const QUOTA_FLAGS = [
  ["max-tunnels", "maxTunnels"],
  ["dial-rate", "dialsPerSecond"],
  ["dial-burst", "dialBurst"],
  ["max-agents", "maxAgents"],
  ["max-buffered-mib", "maxBufferedMiB"],
] as const satisfies readonly (readonly [FlagName, QuotaName])[];

/** What `policy` is to do: nothing (show), reset, or replace with rules checked here already. */
function policyChange(
  f: Values,
  rules: readonly string[],
  given: ReadonlySet<string>,
): EgressPolicy | "default" | null {
  const flagsForSet = (["allow-loopback", "allow-link-local"] as const).filter((x) => given.has(x));
  if (f.default) {
    if (f.set || rules.length > 0 || flagsForSet.length > 0)
      throw new ConfigError("--default takes no rules and no other policy flags");
    return "default";
  }
  if (!f.set) {
    if (rules.length > 0)
      throw new ConfigError("rules are given with --set (which replaces the whole policy)");
    if (flagsForSet.length > 0) throw new ConfigError(`--${flagsForSet[0]} applies with --set`);
    return null;
  }
  return asConfig(() =>
    validateEgressPolicy({
      allow: rules,
      allowLoopback: f["allow-loopback"],
      allowLinkLocal: f["allow-link-local"],
    }),
  );
}

function ok(command: TenantCommand): ParsedTenantCommand {
  return { help: false, command };
}

type Values = ReturnType<typeof parseFlags<typeof TENANT_FLAGS>>["values"];

function bundleSettings(f: Values, tenantId: string): BundleSettings {
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
function manifestSettings(f: Values): ManifestSettings {
  const caFlag = f["server-ca-bundle"] ? "--server-ca-bundle" : "--ca-cert";
  const caBundle = f["server-ca-bundle"] || f["ca-cert"];
  if (!caBundle) {
    throw new ConfigError(
      "a manifest needs the CA bundle that verifies the gateway: --server-ca-bundle or --ca-cert (or $KGW_CA_CERT)",
    );
  }
  if (!f["gateway-address"]) {
    throw new ConfigError("a manifest needs --gateway-address host:port (or $KGW_GATEWAY_ADDRESS)");
  }
  const gateway = parseGatewayAddress(f["gateway-address"]);
  if ("error" in gateway) throw new ConfigError(`--gateway-address: ${gateway.error}`);
  return {
    caBundle: requirePath(caBundle, caFlag),
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
function installTokenSettings(f: Values): InstallTokenSettings {
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
function agentBundleSettings(f: Values, tenantId: string, mountDirGiven: boolean): AgentBundleSettings {
  return certificateSettings(
    f,
    "an agent bundle",
    `kgw-agent-bundle-${tenantId}`,
    mountDirGiven ? f["mount-dir"] : DEFAULT_AGENT_MOUNT_DIR,
  );
}

function certificateSettings(
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
function requirePath(value: string, flag: string): string {
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
function absolutePosixPath(value: string, flag: string): string {
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
function dynamoTableName(v: string): string {
  if (!/^[A-Za-z0-9_.-]{3,255}$/.test(v)) {
    throw new ConfigError("--table: a DynamoDB table name is 3 to 255 letters, digits, _, - or .");
  }
  return v;
}

function outputFormat(v: string): OutputFormat {
  if (v === "text" || v === "json") return v;
  throw new ConfigError(`--output: "${v.slice(0, 40)}" is not text or json`);
}

function parseCredentialKind(v: string): CredentialKind {
  const kind = CREDENTIAL_KINDS.find((k) => k === v);
  if (kind) return kind;
  throw new ConfigError(`--credential: "${v.slice(0, 40)}" is not one of ${CREDENTIAL_KINDS.join(", ")}`);
}

/** Credential ids are token ids (16 hex digits) or certificate serials (hex, maybe with colons). */
function credentialId(v: string): string {
  const id = v.toLowerCase();
  if (!/^[0-9a-f:]{1,95}$/.test(id)) throw new ConfigError("CREDENTIAL_ID: expected the hex id `show` lists");
  return id;
}

function asConfig<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

export function tenantHelp(sub?: TenantSubcommand): string {
  if (sub) {
    const spec = SUBCOMMANDS[sub];
    const flags = Object.fromEntries(
      [...COMMON_FLAGS, ...spec.flags].map((name) => [name, TENANT_FLAGS[name]] as const),
    );
    return formatHelp(`kgw tenant ${sub} ${spec.args.join(" ")} [flags]`, spec.summary, flags);
  }
  const rows = Object.entries(SUBCOMMANDS).map(
    ([name, s]) => `  ${`${name} ${s.args.join(" ")}`.padEnd(30)} ${s.summary}`,
  );
  return formatHelp(
    "kgw tenant <subcommand> [args] [flags]",
    `Manages tenants and their credentials in a tenant store.\n\nSubcommands:\n${rows.join("\n")}`,
    TENANT_FLAGS,
  );
}
