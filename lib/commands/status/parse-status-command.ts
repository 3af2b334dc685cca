/**
 * Everything `kgw status` can be told: its flags, their defaults, and the tenant it may name.
 * The entrypoint calls `parseStatusCommand` once and hands the plain object to
 * run-status-command.ts.
 */
import { defineFlags, formatHelp, parseFlags } from "../../config/flags.js";
import { ConfigError } from "../../errors.js";
import { isValidTenantId } from "../../tenancy/tenant-id.js";
import { ADMIN_URL_ENV, ADMIN_URL_FLAG, DEFAULT_ADMIN_URL, parseAdminUrl } from "./admin-url.js";

/** The default interval of --watch: often enough to watch an agent move, rarely enough to read. */
export const DEFAULT_WATCH_INTERVAL_MS = 2_000;
/**
 * How long one request to the admin address may take: the instance answers for the fleet once
 * its peers answered or timed out (PEER_STATUS_TIMEOUT_MS, 2 s), so this leaves room for that.
 */
export const DEFAULT_STATUS_TIMEOUT_MS = 10_000;
/** The shortest --interval: a tighter loop would only load the admin port and the peers. */
const MIN_WATCH_INTERVAL_MS = 500;

export const STATUS_FLAGS = defineFlags({
  [ADMIN_URL_FLAG]: {
    kind: "string",
    default: DEFAULT_ADMIN_URL,
    help: "Any instance's admin address (http://host:8133); it answers for the whole fleet.",
    env: ADMIN_URL_ENV,
  },
  json: { kind: "bool", default: false, help: "Print the status API's JSON instead of tables." },
  watch: { kind: "bool", default: false, help: "Refresh every --interval until Ctrl-C." },
  interval: { kind: "duration", default: DEFAULT_WATCH_INTERVAL_MS, help: "How often --watch refreshes." },
  timeout: {
    kind: "duration",
    default: DEFAULT_STATUS_TIMEOUT_MS,
    help: "How long to wait for the admin address to answer.",
  },
});

export interface StatusCommand {
  /** The admin address, without a trailing slash. */
  adminUrl: string;
  /** The tenant to show in detail; null: the fleet. */
  tenant: string | null;
  json: boolean;
  watch: boolean;
  intervalMs: number;
  timeoutMs: number;
}

export type ParsedStatusCommand = { help: true; text: string } | { help: false; command: StatusCommand };

export function parseStatusCommand(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedStatusCommand {
  const f = parseFlags(STATUS_FLAGS, argv, env, { allowPositionals: true });
  if (f.help) return { help: true, text: statusHelp() };
  if (f.positionals.length > 1) throw new ConfigError("at most one tenant may be named");
  const tenant = f.positionals[0] ?? null;
  if (tenant !== null && !isValidTenantId(tenant) && tenant !== "default") {
    throw new ConfigError(`"${String(tenant).slice(0, 64)}" is not a tenant id (a DNS label)`);
  }
  const v = f.values;
  if (v.interval < MIN_WATCH_INTERVAL_MS) throw new ConfigError("--interval: at least 500ms");
  if (v.timeout <= 0) throw new ConfigError("--timeout: must be positive");
  return {
    help: false,
    command: {
      adminUrl: parseAdminUrl(v[ADMIN_URL_FLAG]),
      tenant,
      json: v.json,
      watch: v.watch,
      intervalMs: v.interval,
      timeoutMs: v.timeout,
    },
  };
}

export function statusHelp(): string {
  return formatHelp(
    "kgw status [<tenant>] [flags]",
    "Shows the fleet's instances and tenants (or one tenant in detail: its agents, where they are,\n" +
      "its recent dials and failures by reason, its credentials' last use), from any instance's\n" +
      "admin port (GET /status, GET /status/tenants/<id>; docs/OPERATIONS.md).",
    STATUS_FLAGS,
  );
}
