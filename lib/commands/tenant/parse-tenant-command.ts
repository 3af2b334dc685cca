import { formatHelp } from "../../config/flags.js";
import { DEFAULT_EGRESS_POLICY, type EgressPolicy } from "../../egress/egress-policy.js";
import { ConfigError } from "../../errors.js";
import { MAX_ROTATION_GRACE_MS } from "../../tenancy/limits.js";
import { CREDENTIAL_KINDS, type CredentialKind } from "../../tenancy/model.js";
import { type QuotaName, validateQuotas } from "../../tenancy/quotas.js";
import { checkTenantId } from "../../tenancy/tenant-id.js";
import { parseAdminUrl } from "../status/admin-url.js";
import { parseSubcommand } from "../subcommand.js";
import { policyChange } from "./policy-change.js";
import { TENANT_FLAGS } from "./tenant-flags.js";
import {
  type AgentBundleSettings,
  agentBundleSettings,
  asConfig,
  type BundleSettings,
  bundleSettings,
  type CertificateSettings,
  type InstallTokenSettings,
  installTokenSettings,
  type ManifestSettings,
  manifestSettings,
  requirePath,
} from "./tenant-settings.js";

export type {
  AgentBundleSettings,
  BundleSettings,
  CertificateSettings,
  InstallTokenSettings,
  ManifestSettings,
};
export { TENANT_FLAGS };

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
  show: {
    args: ["TENANT"],
    summary:
      "show a tenant and its credentials (no secrets); with --admin-url, also its live state: agents, tunnels, recent failures, each credential's last use",
    flags: ["admin-url"],
  },
  rotate: {
    args: ["TENANT"],
    summary:
      "issue a new credential (a certificate as a bundle); the old ones of that kind stay valid for --grace",
    flags: ["credential", "grace", ...BUNDLE_FLAGS],
  },
  revoke: {
    args: ["TENANT", "CREDENTIAL_ID"],
    summary: "refuse a credential from now on (asks first on a terminal; --yes without one)",
    flags: ["yes"],
  },
  delete: {
    args: ["TENANT"],
    summary:
      "delete a tenant: all its credentials stop working (asks for the tenant id on a terminal; --yes without one)",
    flags: ["yes"],
  },
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
      "ca-secret",
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
    flags: ["set", "deny-all", "default", "allow-loopback", "allow-link-local"],
  },
  quota: {
    args: ["TENANT"],
    summary:
      "show the tenant's quota overrides; --max-tunnels, --dial-rate, --dial-burst, --max-agents set them per instance (0: back to the server's default)",
    flags: ["max-tunnels", "dial-rate", "dial-burst", "max-agents", "max-buffered-mib"],
  },
};
const COMMON_FLAGS: readonly FlagName[] = ["store-dir", "table", "output", "json"];

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
  /** `adminUrl`: where to ask for the live state (--admin-url or KGW_ADMIN_URL); null: store only. */
  | (Common & { name: "show"; tenantId: string; adminUrl: string | null })
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
  /** `yes`: confirmed on the command line; otherwise the person at the terminal is asked. */
  | (Common & { name: "revoke"; tenantId: string; credentialId: string; yes: boolean })
  | (Common & { name: "delete"; tenantId: string; yes: boolean })
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
  const first = parseSubcommand(TENANT_FLAGS, SUBCOMMANDS, tenantHelp, argv, env);
  if (first.help) return first;
  const { name, args, parsed } = first;
  const spec = SUBCOMMANDS[name];
  // Only flags from the command line: an environment variable set for other subcommands is fine.
  for (const flag of parsed.onCommandLine) {
    if (!COMMON_FLAGS.includes(flag) && !spec.flags.includes(flag)) {
      throw new ConfigError(`--${flag} does not apply to kgw tenant ${name}`);
    }
  }
  if (spec.moreArgs ? args.length < spec.args.length : args.length !== spec.args.length) {
    throw new ConfigError(`usage: kgw tenant ${name} ${spec.args.join(" ")}`.trimEnd());
  }
  const caFilesGiven = parsed.onCommandLine.has("ca-cert") || parsed.onCommandLine.has("ca-key");
  if (parsed.onCommandLine.has("ca-secret") && caFilesGiven) {
    throw new ConfigError("--ca-secret and --ca-cert/--ca-key name two CAs: give one");
  }
  // CA files on the command line win over a $KGW_CA_SECRET exported for other commands (the
  // runbook exports it); otherwise the secret wins over CA files left in the environment.
  const f = caFilesGiven ? { ...parsed.values, "ca-secret": "" } : parsed.values;
  if (parsed.onCommandLine.has("store-dir") && parsed.onCommandLine.has("table")) {
    throw new ConfigError("--store-dir and --table name two different stores: give one");
  }
  // --table wins over a KGW_TENANT_STORE_DIR left in the environment.
  const table = f.table === "" ? undefined : dynamoTableName(f.table);
  const common: Common = {
    storeDir: table ? f["store-dir"] : requirePath(f["store-dir"], "--store-dir"),
    table,
    output: outputFormat(f.output, f.json, parsed.onCommandLine.has("output")),
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
      return ok({
        ...common,
        name,
        tenantId: tenantId(),
        adminUrl: f["admin-url"] === "" ? null : parseAdminUrl(f["admin-url"]),
      });
    case "delete":
      return ok({ ...common, name, tenantId: tenantId(), yes: f.yes });
    case "revoke":
      return ok({ ...common, name, tenantId: tenantId(), credentialId: credentialId(args[1]!), yes: f.yes });
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
      return ok({
        ...common,
        name,
        tenantId: tenantId(),
        manifest: manifestSettings(f),
      });
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

function ok(command: TenantCommand): ParsedTenantCommand {
  return { help: false, command };
}

function dynamoTableName(v: string): string {
  if (!/^[A-Za-z0-9_.-]{3,255}$/.test(v)) {
    throw new ConfigError("--table: a DynamoDB table name is 3 to 255 letters, digits, _, - or .");
  }
  return v;
}

function outputFormat(v: string, json: boolean, outputGiven: boolean): OutputFormat {
  if (json) {
    if (outputGiven && v !== "json")
      throw new ConfigError(`--json and --output=${v.slice(0, 40)} disagree: give one`);
    return "json";
  }
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

/** Every subcommand's name, from the table that dispatches them (the help texts are checked against it). */
export const TENANT_SUBCOMMANDS = Object.keys(SUBCOMMANDS) as readonly TenantSubcommand[];

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
