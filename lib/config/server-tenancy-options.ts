/**
 * `kgw server`'s tenant mode (a tenant store in a directory, or the fleet's table): its flags,
 * parsed and checked here, once; SERVER_FLAGS includes them.
 */
import { ConfigError } from "../errors.js";
import { DEFAULT_WATCH_INTERVAL_MS } from "../tenancy/limits.js";
import { DEFAULT_MAX_AGENTS, type TenantQuotas, validateQuotas } from "../tenancy/quotas.js";
import { isValidTenantId } from "../tenancy/tenant-id.js";
import { defineFlags, type FlagValues } from "./flags.js";
import {
  INSTALL_FLAG_NAMES,
  type INSTALL_FLAGS,
  type InstallOptions,
  parseInstall,
} from "./install-options.js";

export const TENANCY_FLAGS = defineFlags({
  "tenant-store-dir": {
    kind: "string",
    default: "",
    help: "Serve many tenants: their credentials come from this tenant store (kgw tenant). Without it, the server is the single-tenant drop-in.",
    env: "KGW_TENANT_STORE_DIR",
  },
  "tenant-ca-cert": {
    kind: "string",
    default: "",
    help: "With --tenant-store-dir: the gateway CA that issued tenants' client certificates (kgw tenant --ca-cert).",
    env: "KGW_CA_CERT",
  },
  "tenant-watch-interval": {
    kind: "duration",
    default: DEFAULT_WATCH_INTERVAL_MS,
    help: "With --tenant-store-dir: how often the store is re-read; a revoked credential is refused, and its live tunnels closed, within this interval plus one read.",
  },
  "tenant-max-tunnels": {
    kind: "int",
    default: 1000,
    help: "With --tenant-store-dir: tunnels a tenant may have open at once on this instance, unless its own quota says otherwise (kgw tenant quota).",
  },
  "tenant-dial-rate": {
    kind: "int",
    default: 100,
    help: "With --tenant-store-dir: dials per second a tenant may sustain on this instance (default quota).",
  },
  "tenant-dial-burst": {
    kind: "int",
    default: 200,
    help: "With --tenant-store-dir: dials a tenant may make at once above its rate (default quota).",
  },
  "tenant-max-agents": {
    kind: "int",
    default: DEFAULT_MAX_AGENTS,
    help: "With --tenant-store-dir: agent streams a tenant may have connected to this instance (default quota): twice the 5,000 nodes of the largest Kubernetes cluster, each running the agent as a DaemonSet.",
  },
  "tenant-max-buffered-mib": {
    kind: "int",
    default: 1024,
    help: "With --tenant-store-dir: MiB of tunneled bytes this instance may hold for a tenant at once, the receive windows of its tunnels (default quota).",
  },
  "uds-tenant": {
    kind: "string",
    default: "",
    help: "With --tenant-store-dir and --uds-name: the tenant whose kube-apiserver the Unix socket serves (the socket carries no credential).",
  },
});

export interface TenancyOptions {
  /** Where tenant records are: the directory store, or the fleet's DynamoDB table. */
  store: { kind: "dir"; dir: string } | { kind: "dynamodb"; table: string };
  /** The gateway CA: client certificates of every role are verified against it. */
  caCert: string;
  watchIntervalMs: number;
  /** The tenant of callers on the Unix socket; null when there is no socket. */
  udsTenant: string | null;
  /** Every tenant's quotas unless its record sets its own (lib/tenancy/quotas.ts). */
  defaultQuotas: Required<TenantQuotas>;
  /** The one-line install route (lib/server/install/); null: off. */
  install: InstallOptions | null;
}

/** Faster polling buys little and costs a store read per interval per instance. */
const MIN_WATCH_INTERVAL_MS = 200;
/** Revocation takes effect within the interval: past a minute it is no longer prompt. */
const MAX_WATCH_INTERVAL_MS = 60_000;

/** A quota default out of bounds reads as the flag it came from. */
function asConfigError<T>(fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    const m = (err as Error).message.replace(
      /^quota (maxTunnels|dialsPerSecond|dialBurst|maxAgents|maxBufferedMiB)/,
      (_all, name: string) => `--${QUOTA_FLAGS[name as keyof typeof QUOTA_FLAGS]}`,
    );
    throw new ConfigError(m);
  }
}

const QUOTA_FLAGS = {
  maxTunnels: "tenant-max-tunnels",
  dialsPerSecond: "tenant-dial-rate",
  dialBurst: "tenant-dial-burst",
  maxAgents: "tenant-max-agents",
  maxBufferedMiB: "tenant-max-buffered-mib",
} as const;

/**
 * The server flags parseTenancy reads (a slice of SERVER_FLAGS' values): its own, the install
 * route's, the fleet's table (the other tenant store), the Unix socket, and the drop-in's
 * credential flags it refuses.
 */
export type TenancyFlags = FlagValues<typeof TENANCY_FLAGS> &
  FlagValues<typeof INSTALL_FLAGS> & {
    "registry-table": string;
    "uds-name": string;
    "agent-token": string;
    "agent-token-file": string;
    "cluster-ca-cert": string;
    "server-ca-cert": string;
    "allow-anonymous-callers": boolean;
    "insecure-frontend": boolean;
  };

/**
 * Hosted mode: every credential comes from the tenant store, so the flags that configure the
 * drop-in's own credentials would be a second, unscoped way in and are refused.
 */
export function parseTenancy(f: TenancyFlags): TenancyOptions | null {
  if (f["tenant-store-dir"] && f["registry-table"]) {
    throw new ConfigError(
      "--tenant-store-dir cannot be used with --registry-table: a fleet's tenants are in its table",
    );
  }
  const storeFlag = f["registry-table"] ? "--registry-table" : "--tenant-store-dir";
  if (!f["tenant-store-dir"] && !f["registry-table"]) {
    const stray = INSTALL_FLAG_NAMES.find((flag) => flag !== "install-namespace" && f[flag]);
    if (stray)
      throw new ConfigError(`--${stray} needs --tenant-store-dir (the install route serves tenants)`);
    return null;
  }
  const conflicting = [
    "agent-token",
    "agent-token-file",
    "cluster-ca-cert",
    "server-ca-cert",
    "allow-anonymous-callers",
    "insecure-frontend",
  ] as const;
  for (const flag of conflicting) {
    if (f[flag]) {
      throw new ConfigError(
        `--${flag} cannot be used with ${storeFlag}: tenants' credentials come from the store`,
      );
    }
  }
  if (!f["tenant-ca-cert"]) {
    throw new ConfigError(
      `${storeFlag} needs --tenant-ca-cert (or $KGW_CA_CERT): the CA that issued tenants' client certificates`,
    );
  }
  if (f["uds-name"] && !f["uds-tenant"]) {
    throw new ConfigError(
      `--uds-name with ${storeFlag} needs --uds-tenant: the Unix socket carries no credential, so its tenant is configured`,
    );
  }
  if (f["uds-tenant"] && !f["uds-name"]) throw new ConfigError("--uds-tenant needs --uds-name");
  if (f["uds-tenant"] && !isValidTenantId(f["uds-tenant"])) {
    throw new ConfigError(`--uds-tenant: "${f["uds-tenant"]}" is not a tenant id`);
  }
  const interval = f["tenant-watch-interval"];
  if (interval < MIN_WATCH_INTERVAL_MS || interval > MAX_WATCH_INTERVAL_MS) {
    throw new ConfigError(
      `--tenant-watch-interval must be between ${MIN_WATCH_INTERVAL_MS}ms and ${MAX_WATCH_INTERVAL_MS / 1000}s`,
    );
  }
  const defaultQuotas = asConfigError(() =>
    validateQuotas({
      maxTunnels: f["tenant-max-tunnels"],
      dialsPerSecond: f["tenant-dial-rate"],
      dialBurst: f["tenant-dial-burst"],
      maxAgents: f["tenant-max-agents"],
      maxBufferedMiB: f["tenant-max-buffered-mib"],
    }),
  ) as Required<TenantQuotas>;
  return {
    defaultQuotas,
    install: parseInstall(f, f["tenant-ca-cert"]),
    store: f["registry-table"]
      ? { kind: "dynamodb", table: f["registry-table"] }
      : { kind: "dir", dir: f["tenant-store-dir"] },
    caCert: f["tenant-ca-cert"],
    watchIntervalMs: interval,
    udsTenant: f["uds-tenant"] || null,
  };
}
