/**
 * Everything `kgw server` can be told: validation and the plain options object (the flag table,
 * with defaults and help, is server-flags.ts). The entrypoint calls
 * `parseServerOptions(argv, env)` once and passes the plain object down.
 * Flag names follow upstream proxy-server where the meaning is the same.
 */

import { randomUUID } from "node:crypto";
import { ConfigError } from "../errors.js";
import { formatHelp, parseFlags } from "./flags.js";
import { type FleetConfig, parseFleet } from "./fleet-options.js";
import type { InstallOptions } from "./install-options.js";
import { type LogLevel, parseLogLevel } from "./log-level.js";
import { type MetricsEmfOptions, parseMetricsEmf } from "./metrics-emf-options.js";
import { type PeerOptions, parsePeer } from "./peer-options.js";
import { SERVER_FLAGS } from "./server-flags.js";
import { parseTenancy, type TenancyOptions } from "./server-tenancy-options.js";
import { checkSingleTenantAuth } from "./single-tenant-auth.js";
import { parseTlsMinVersion, type TlsFiles, type TlsMinVersion } from "./tls.js";

export type ProxyStrategy = "default" | "destHost" | "defaultRoute";

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
  handshakes: {
    timeoutMs: number;
    maxInProgress: number;
    maxPerSource: number;
    maxNewPerSecond: number;
    /** The rate's bucket (0: one second's worth). */
    burst: number;
    /** Connections that may wait for their handshake to start (0: none). */
    maxWaiting: number;
  };
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
  /** kgw_server_dial_step_seconds, the dial path's cost per step (lib/observability/dial-steps.ts). */
  dialStepMetrics: boolean;
  /** Tenants labelled by id in kgw_tenant_* metrics; beyond, tenant="_other". */
  tenantMetricsLimit: number;
  /** Metrics as CloudWatch EMF documents on stdout (--metrics-emf-interval); null: off. */
  metricsEmf: MetricsEmfOptions | null;
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
    "max-tls-handshake-burst",
    "max-tls-handshakes-waiting",
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
        burst: f["max-tls-handshake-burst"],
        maxWaiting: f["max-tls-handshakes-waiting"],
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
      dialStepMetrics: f["dial-step-metrics"],
      tenantMetricsLimit: f["tenant-metrics-limit"],
      metricsEmf: parseMetricsEmf(f, f["registry-table"]),
      tenancy,
      peer: parsePeer(f),
      fleet: parseFleet(f, f["peer-port"]),
    },
  };
}
