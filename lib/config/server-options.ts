/**
 * Everything `kgw server` can be told, in one place: flag table, defaults, validation. The
 * entrypoint calls `parseServerOptions(argv, env)` once and passes the plain object down.
 * Flag names follow upstream proxy-server where the meaning is the same.
 */

import { randomUUID } from "node:crypto";
import { ConfigError } from "../errors.js";
import { DEFAULT_DIAL_TIMEOUT_MS } from "../tunnel/timeouts.js";
import { LOGTOSTDERR_FLAG } from "./compat-flags.js";
import { defineFlags, type FlagValues, formatHelp, parseFlags } from "./flags.js";
import { FLEET_FLAGS, type FleetConfig, parseFleet } from "./fleet-options.js";
import { INSTALL_FLAGS, type InstallOptions } from "./install-options.js";
import { PEER_FLAGS, type PeerOptions, parsePeer } from "./peer-options.js";
import { PORTS_FILE_FLAG } from "./ports-file-flag.js";
import { parseTenancy, TENANCY_FLAGS, type TenancyOptions } from "./server-tenancy-options.js";
import { checkSingleTenantAuth } from "./single-tenant-auth.js";
import { parseTlsMinVersion, type TlsFiles, type TlsMinVersion } from "./tls.js";

export const SERVER_FLAGS = defineFlags({
  ...FLEET_FLAGS,
  "server-id": { kind: "string", default: "", help: "Unique ID of this server instance (random if empty)." },
  "server-count": {
    kind: "int",
    default: 1,
    help: "Number of server instances agents should connect to; sent to agents as serverCount.",
  },
  mode: {
    kind: "string",
    default: "grpc",
    help: "Accepted for upstream compatibility (grpc|http-connect); both are always served.",
  },
  "server-port": { kind: "port", default: 8090, help: "Frontend port (gRPC and HTTP CONNECT)." },
  "server-bind-address": { kind: "string", default: "", help: "Frontend bind address (all if empty)." },
  "uds-name": {
    kind: "string",
    default: "",
    help: "Also serve the frontend on this Unix socket (plaintext).",
  },
  "delete-existing-uds-file": {
    kind: "bool",
    default: false,
    help: "Remove a stale file at --uds-name before listening.",
  },
  "server-cert": { kind: "string", default: "", help: "Frontend TLS certificate (PEM)." },
  "server-key": { kind: "string", default: "", help: "Frontend TLS private key (PEM)." },
  "server-ca-cert": {
    kind: "string",
    default: "",
    help: "CA for frontend client certificates; when set, clients must present one (mTLS).",
  },
  "insecure-frontend": {
    kind: "bool",
    default: false,
    help: "Serve the TCP frontend without TLS (anyone who reaches it may open tunnels). Only for tests and trusted networks.",
  },
  "allow-anonymous-callers": {
    kind: "bool",
    default: false,
    help: "Serve the TLS frontend without --server-ca-cert: callers need no client certificate. Only for trusted networks.",
  },
  "agent-port": { kind: "port", default: 8132, help: "Agent port (AgentService.Connect)." },
  "agent-bind-address": { kind: "string", default: "", help: "Agent bind address (all if empty)." },
  "cluster-cert": { kind: "string", default: "", help: "Agent-facing TLS certificate (PEM)." },
  "cluster-key": { kind: "string", default: "", help: "Agent-facing TLS private key (PEM)." },
  "cluster-ca-cert": {
    kind: "string",
    default: "",
    help: "CA for agent client certificates; when set, agents may authenticate with one (mTLS).",
  },
  "agent-token-file": {
    kind: "string",
    default: "",
    help: "File with accepted agent bearer tokens, one per line; kept only as SHA-256 hashes.",
  },
  "agent-token": {
    kind: "string",
    default: "",
    help: "An accepted agent bearer token (prefer the file or the environment).",
    env: "KGW_AGENT_TOKEN",
  },
  ...PEER_FLAGS,
  "admin-port": { kind: "port", default: 8133, help: "Admin port (/metrics)." },
  "admin-bind-address": { kind: "string", default: "127.0.0.1", help: "Admin bind address." },
  "health-port": { kind: "port", default: 8134, help: "Health port (/healthz, /readyz)." },
  "health-bind-address": { kind: "string", default: "", help: "Health bind address (all if empty)." },
  "keepalive-time": {
    kind: "duration",
    default: 3_600_000,
    help: "Keepalive ping interval towards agents (HTTP/2 PING on gRPC, PING frames on kgw-tunnel/1).",
  },
  "frontend-keepalive-time": {
    kind: "duration",
    default: 3_600_000,
    help: "gRPC keepalive ping interval towards frontend clients.",
  },
  "agent-probe-interval": {
    kind: "duration",
    default: 5_000,
    help: "An agent silent this long is pinged (at most 200 pings a second for all agents: with more than 1,000 idle ones each is asked less often); one that does not answer within 2s gets no new dials until it does (0 disables).",
  },
  "agent-liveness-timeout": {
    kind: "duration",
    default: 60_000,
    help: "An agent silent this long, with a ping unanswered, is disconnected and its tunnels closed (0 never; needs --agent-probe-interval).",
  },
  "tls-handshake-timeout": {
    kind: "duration",
    default: 10_000,
    help: "How long a client may take to complete its TLS handshake (and an agent its first request) before its connection is closed.",
  },
  "max-tls-handshakes": {
    kind: "int",
    default: 1024,
    help: "TLS handshakes in progress per listener (agent port, frontend) beyond which new connections are closed (0: no limit).",
  },
  "max-tls-handshakes-per-source": {
    kind: "int",
    default: 64,
    help: "TLS handshakes in progress from one source address (IPv6: one /64) per listener (0: no limit).",
  },
  "max-tls-handshake-rate": {
    kind: "int",
    // About 1 ms of CPU for the handshake and 2.2 ms for a whole agent registration, on the one
    // thread that serves everything: 300 a second keeps the handshakes of a reconnect storm to a third to
    // half of that thread, about what one instance sustains of CONNECT dials (4.4 ms each) besides
    // (docs/CONFIGURATION.md, docs/PERFORMANCE.md).
    default: 300,
    help: "New TLS handshakes a second per listener (a token bucket holding one second's worth); connections over it are reset before TLS and clients retry with their backoff (0: no limit).",
  },
  "refusal-throttle-threshold": {
    kind: "int",
    default: 20,
    help: "Callers refused (credential, egress policy, quota) more than this many times a second from one source address have their new TLS handshakes rate-limited to --refusal-throttle-rate until 10s after their last refusal (0: off; turn it off when many control planes share one address).",
  },
  "refusal-throttle-rate": {
    kind: "int",
    default: 5,
    help: "New TLS handshakes a second a throttled source may still start; its other connections are reset before TLS.",
  },
  "graceful-shutdown-timeout": {
    kind: "duration",
    default: 20_000,
    help: "On SIGTERM, how long open tunnels may finish before they are closed.",
  },
  "backend-dial-timeout": {
    kind: "duration",
    default: DEFAULT_DIAL_TIMEOUT_MS,
    help: "How long a dial may wait for the agent's answer (0 disables; not recommended).",
  },
  "proxy-strategies": {
    kind: "string",
    default: "default",
    help: "Comma-separated agent selection strategies: default, destHost, defaultRoute.",
  },
  "tls-min-version": { kind: "string", default: "VersionTLS12", help: "VersionTLS12 or VersionTLS13." },
  "max-header-bytes": { kind: "int", default: 16_384, help: "Largest HTTP CONNECT request head accepted." },
  "header-timeout": {
    kind: "duration",
    default: 10_000,
    help: "How long a new frontend connection may take to send its first request.",
  },
  ...TENANCY_FLAGS,
  ...INSTALL_FLAGS,
  "audit-log": {
    kind: "string",
    default: "",
    help: "Write one JSON audit record per dial to this file (appended, created 0600, reopened on SIGHUP), or to stdout with -. Off when empty.",
  },
  "tenant-metrics-limit": {
    kind: "int",
    default: 1000,
    help: 'Tenants with their own label in the kgw_tenant_* metrics; the rest are counted as tenant="_other" (0: all of them).',
  },
  "log-level": {
    kind: "string",
    default: "info",
    help: "trace, debug, info, warn, error.",
    env: "KGW_LOG_LEVEL",
  },
  logtostderr: LOGTOSTDERR_FLAG,
  "ports-file": PORTS_FILE_FLAG,
});

export type ProxyStrategy = "default" | "destHost" | "defaultRoute";
export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";

export interface ServerOptions {
  serverId: string;
  serverCount: number;
  frontend: {
    /** null when the TCP frontend is off (only the Unix socket serves). */
    port: number | null;
    host: string;
    tls: TlsFiles | null;
    /**
     * The TCP frontend admits callers without a client certificate: plaintext
     * (--insecure-frontend) or TLS without a client CA (--allow-anonymous-callers). Only ever
     * true because a flag asked for it; the gateway warns at startup.
     */
    anonymousCallers: boolean;
    /** TLS callers must show a client certificate (tenant mode also takes caller tokens). */
    clientCertRequired: boolean;
    udsPath: string;
    deleteExistingUds: boolean;
    keepaliveMs: number;
    maxHeaderBytes: number;
    headerTimeoutMs: number;
  };
  agent: {
    port: number;
    host: string;
    tls: TlsFiles;
    tokenFile: string;
    /** Tokens given inline (flag or env). Never logged. */
    tokens: string[];
    keepaliveMs: number;
    /** Silence before a liveness probe; 0 disables liveness (lib/server/agent-liveness.ts). */
    probeIntervalMs: number;
    /** Silence after which an agent is disconnected; 0 never. */
    livenessTimeoutMs: number;
  };
  /** Per TLS listener (lib/transport/handshake-gate.ts). */
  handshakes: { timeoutMs: number; maxInProgress: number; maxPerSource: number; maxNewPerSecond: number };
  /** Sources that keep being refused (lib/transport/refusal-throttle.ts); threshold 0: off. */
  refusalThrottle: { threshold: number; handshakesPerSecond: number };
  admin: { port: number; host: string };
  health: { port: number; host: string };
  tlsMinVersion: TlsMinVersion;
  gracefulShutdownMs: number;
  backendDialTimeoutMs: number;
  proxyStrategies: ProxyStrategy[];
  logLevel: LogLevel;
  /** Where to announce the bound ports (--ports-file); null: nowhere. */
  portsFile: string | null;
  /** Where audit records go: a file, "-" for stdout, or null for nowhere (the default). */
  auditLog: string | null;
  /** Tenants labelled by id in kgw_tenant_* metrics; beyond, tenant="_other". */
  tenantMetricsLimit: number;
  /** Hosted mode (--tenant-store-dir); null for the single-tenant drop-in. */
  tenancy: TenancyOptions | null;
  /** The fleet peer port (lib/fleet/peer/); null: off (--peer-port=0). */
  peer: PeerOptions | null;
  /** Hosted fleet mode (--registry-table, lib/fleet/); null: this instance alone. */
  fleet: FleetConfig | null;
}

/**
 * Each labelled tenant is about a dozen series (kgw_tenant_*); past this many tenants one
 * instance would cost a Prometheus more than the rest of the fleet's metrics together.
 */
const MAX_TENANT_METRICS_LIMIT = 100_000;

const STRATEGIES: readonly ProxyStrategy[] = ["default", "destHost", "defaultRoute"];
const LOG_LEVELS: readonly LogLevel[] = ["trace", "debug", "info", "warn", "error"];

export function parseLogLevel(v: string): LogLevel {
  if ((LOG_LEVELS as readonly string[]).includes(v)) return v as LogLevel;
  throw new ConfigError(`--log-level: "${v}" is not one of ${LOG_LEVELS.join(", ")}`);
}

export const SERVER_USAGE = "kgw server [flags]";
export const serverHelp = (): string =>
  formatHelp(
    SERVER_USAGE,
    "Runs a gateway instance: agents connect on --agent-port, kube-apiserver dials through --server-port or --uds-name.",
    SERVER_FLAGS,
  );

export type { InstallOptions, PeerOptions, TenancyOptions };

export type ParsedServerOptions = { help: true } | { help: false; options: ServerOptions };

export function parseServerOptions(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedServerOptions {
  const { values: f, help } = parseFlags(SERVER_FLAGS, argv, env);
  if (help) return { help: true };

  if (f["server-count"] < 1) throw new ConfigError("--server-count must be at least 1");
  if (f.mode !== "grpc" && f.mode !== "http-connect") {
    throw new ConfigError(`--mode: "${f.mode}" is not grpc or http-connect`);
  }
  if (Boolean(f["server-cert"]) !== Boolean(f["server-key"])) {
    throw new ConfigError("--server-cert and --server-key must be given together");
  }
  if (f["server-ca-cert"] && !f["server-cert"]) {
    throw new ConfigError("--server-ca-cert needs --server-cert and --server-key (mTLS is on top of TLS)");
  }
  if (f["insecure-frontend"] && f["server-cert"]) {
    throw new ConfigError("--insecure-frontend contradicts --server-cert; choose one");
  }
  if (!f["cluster-cert"] || !f["cluster-key"]) {
    throw new ConfigError("--cluster-cert and --cluster-key are required: agents always connect over TLS");
  }
  const tenancy = parseTenancy(f);
  if (!tenancy) checkSingleTenantAuth(f);
  const tcpFrontend = Boolean(f["server-cert"]) || f["insecure-frontend"];
  const strategies = f["proxy-strategies"].split(",").map((s) => s.trim());
  for (const s of strategies) {
    if (!(STRATEGIES as readonly string[]).includes(s)) {
      throw new ConfigError(`--proxy-strategies: "${s}" is not one of ${STRATEGIES.join(", ")}`);
    }
  }
  if (f["max-header-bytes"] < 256 || f["max-header-bytes"] > 1 << 20) {
    throw new ConfigError("--max-header-bytes must be between 256 and 1048576");
  }
  if (f["header-timeout"] <= 0) throw new ConfigError("--header-timeout must be positive");
  if (f["agent-liveness-timeout"] > 0 && f["agent-probe-interval"] === 0) {
    throw new ConfigError(
      "--agent-liveness-timeout needs --agent-probe-interval (a silent agent must be asked first)",
    );
  }
  if (f["agent-liveness-timeout"] > 0 && f["agent-liveness-timeout"] < 2 * f["agent-probe-interval"]) {
    throw new ConfigError(
      "--agent-liveness-timeout must be at least twice --agent-probe-interval (an agent must get a chance to answer)",
    );
  }
  if (f["tls-handshake-timeout"] <= 0) throw new ConfigError("--tls-handshake-timeout must be positive");
  if (f["refusal-throttle-rate"] < 1) throw new ConfigError("--refusal-throttle-rate must be at least 1");
  for (const name of [
    "max-tls-handshakes",
    "max-tls-handshakes-per-source",
    "max-tls-handshake-rate",
    "refusal-throttle-threshold",
  ] as const) {
    if (f[name] < 0) throw new ConfigError(`--${name} must not be negative`);
  }
  if (f["tenant-metrics-limit"] < 0 || f["tenant-metrics-limit"] > MAX_TENANT_METRICS_LIMIT) {
    throw new ConfigError(`--tenant-metrics-limit must be between 0 and ${MAX_TENANT_METRICS_LIMIT}`);
  }

  return {
    help: false,
    options: {
      serverId: f["server-id"] || randomUUID(),
      serverCount: f["server-count"],
      frontend: {
        port: tcpFrontend ? f["server-port"] : null,
        host: f["server-bind-address"],
        tls: f["server-cert"]
          ? { cert: f["server-cert"], key: f["server-key"], ca: tenancy?.caCert ?? f["server-ca-cert"] }
          : null,
        anonymousCallers: tcpFrontend && !tenancy && !f["server-ca-cert"],
        // Tenants' callers may show a caller token on CONNECT instead of a certificate.
        clientCertRequired: !tenancy,
        udsPath: f["uds-name"],
        deleteExistingUds: f["delete-existing-uds-file"],
        keepaliveMs: f["frontend-keepalive-time"],
        maxHeaderBytes: f["max-header-bytes"],
        headerTimeoutMs: f["header-timeout"],
      },
      agent: {
        port: f["agent-port"],
        host: f["agent-bind-address"],
        tls: { cert: f["cluster-cert"], key: f["cluster-key"], ca: tenancy?.caCert ?? f["cluster-ca-cert"] },
        tokenFile: f["agent-token-file"],
        tokens: f["agent-token"] ? [f["agent-token"]] : [],
        keepaliveMs: f["keepalive-time"],
        probeIntervalMs: f["agent-probe-interval"],
        livenessTimeoutMs: f["agent-liveness-timeout"],
      },
      handshakes: {
        timeoutMs: f["tls-handshake-timeout"],
        maxInProgress: f["max-tls-handshakes"],
        maxPerSource: f["max-tls-handshakes-per-source"],
        maxNewPerSecond: f["max-tls-handshake-rate"],
      },
      refusalThrottle: {
        threshold: f["refusal-throttle-threshold"],
        handshakesPerSecond: f["refusal-throttle-rate"],
      },
      admin: { port: f["admin-port"], host: f["admin-bind-address"] },
      health: { port: f["health-port"], host: f["health-bind-address"] },
      tlsMinVersion: parseTlsMinVersion(f["tls-min-version"]),
      gracefulShutdownMs: f["graceful-shutdown-timeout"],
      backendDialTimeoutMs: f["backend-dial-timeout"],
      proxyStrategies: strategies as ProxyStrategy[],
      logLevel: parseLogLevel(f["log-level"]),
      portsFile: f["ports-file"] || null,
      auditLog: f["audit-log"] || null,
      tenantMetricsLimit: f["tenant-metrics-limit"],
      tenancy,
      peer: parsePeer(f),
      fleet: parseFleet(f, f["peer-port"]),
    },
  };
}

export type ServerFlagValues = FlagValues<typeof SERVER_FLAGS>;
