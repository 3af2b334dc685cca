/**
 * Everything `kgw server` can be told, in one place: flag table, defaults, validation. The
 * entrypoint calls `parseServerOptions(argv, env)` once and passes the plain object down.
 * Flag names follow upstream proxy-server where the meaning is the same.
 */

import { randomUUID } from "node:crypto";
import { ConfigError } from "../errors.js";
import { type GatewayAddress, parseGatewayAddress } from "../tenancy/bundle/gateway-address.js";
import { checkImage, checkNamespace, DEFAULT_NAMESPACE } from "../tenancy/manifest/input.js";
import { type TenantQuotas, validateQuotas } from "../tenancy/quotas.js";
import { isValidTenantId } from "../tenancy/tenant-id.js";
import { LOGTOSTDERR_FLAG } from "./compat-flags.js";
import { defineFlags, type FlagValues, formatHelp, parseFlags } from "./flags.js";
import { FLEET_FLAGS, type FleetConfig, parseFleet } from "./fleet-options.js";
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
    default: 10_000,
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
    default: 2_000,
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
    default: 32,
    help: "With --tenant-store-dir: agent streams a tenant may have connected to this instance (default quota).",
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
  "install-gateway-address": {
    kind: "string",
    default: "",
    help: "With --tenant-store-dir: serve the one-line agent install (GET /v1/install/<token>.yaml on --agent-port); host:port the installed agents dial, as the gateway's serving certificate names it. Off when empty.",
  },
  "install-port": {
    kind: "port",
    default: 0,
    help: "With --install-gateway-address: also serve the install route, and nothing else, on this TLS port (for a load balancer's TLS listener with a publicly trusted certificate in front; 0: only on --agent-port).",
  },
  "install-bind-address": {
    kind: "string",
    default: "",
    help: "With --install-port: its bind address (all if empty).",
  },
  "install-ca-bundle": {
    kind: "string",
    default: "",
    help: "With --install-gateway-address: the CA bundle (PEM) installed agents verify the gateway with (default: --tenant-ca-cert).",
  },
  "install-agent-image": {
    kind: "string",
    default: "",
    help: "With --install-gateway-address: the installed agent's image, with a tag or digest (default: this version's kgw image).",
  },
  "install-namespace": {
    kind: "string",
    default: DEFAULT_NAMESPACE,
    help: "With --install-gateway-address: the namespace of the installed agent's objects.",
  },
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
 * The peer port and this instance's peer identity: mTLS both ways, certificates from `tls.ca`
 * carrying the URI SAN kgw://fleet/peer (lib/fleet/peer/peer-identity.ts).
 */
export interface PeerOptions {
  port: number;
  host: string;
  tls: TlsFiles;
}

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

/** What the install route's manifests hold besides the tenant and its token. */
export interface InstallOptions {
  /** What the installed agents dial (--install-gateway-address). */
  gateway: GatewayAddress;
  /** File with the CA bundle they verify the gateway with (read and checked at start). */
  caBundle: string;
  /** undefined: the kgw agent image of this version. */
  image: string | undefined;
  namespace: string;
  /** A TLS listener of its own serving only the route (--install-port); null: the agent port only. */
  listener: { port: number; host: string } | null;
}

/**
 * Each labelled tenant is about a dozen series (kgw_tenant_*); past this many tenants one
 * instance would cost a Prometheus more than the rest of the fleet's metrics together.
 */
const MAX_TENANT_METRICS_LIMIT = 100_000;

/** Faster polling buys little and costs a store read per interval per instance. */
const MIN_WATCH_INTERVAL_MS = 200;
/** Revocation takes effect within the interval: past a minute it is no longer prompt. */
const MAX_WATCH_INTERVAL_MS = 60_000;

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
      auditLog: f["audit-log"] || null,
      tenantMetricsLimit: f["tenant-metrics-limit"],
      tenancy,
      peer: parsePeer(f),
      fleet: parseFleet(f, f["peer-port"]),
    },
  };
}

const PEER_FLAGS = ["peer-bind-address", "peer-cert", "peer-key", "peer-ca-cert"] as const;

/**
 * The peer port is off unless given a port; when on, it needs all three TLS files: a peer link is
 * always mutual TLS (anyone who can open one can dial as any tenant).
 */
function parsePeer(f: ServerFlagValues): PeerOptions | null {
  if (f["peer-port"] === 0) {
    const stray = PEER_FLAGS.find((flag) => f[flag]);
    if (stray) throw new ConfigError(`--${stray} needs --peer-port`);
    return null;
  }
  const missing = PEER_FLAGS.filter((flag) => flag !== "peer-bind-address" && !f[flag]);
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

type ServerFlagValues = FlagValues<typeof SERVER_FLAGS>;

/** What the single-tenant drop-in needs: callers and agents must each have a way to authenticate. */
function checkSingleTenantAuth(f: ServerFlagValues): void {
  for (const flag of ["tenant-ca-cert", "uds-tenant"] as const) {
    if (f[flag]) throw new ConfigError(`--${flag} needs --tenant-store-dir`);
  }
  // Anyone who can open a tunnel reaches everything the agents reach, so a TCP frontend without
  // caller authentication is never a default. Upstream refuses TCP without --server-ca-cert.
  if (f["allow-anonymous-callers"] && f["server-ca-cert"]) {
    throw new ConfigError(
      "--allow-anonymous-callers contradicts --server-ca-cert (which requires client certificates); choose one",
    );
  }
  if (f["allow-anonymous-callers"] && !f["server-cert"] && !f["insecure-frontend"]) {
    throw new ConfigError(
      "--allow-anonymous-callers applies to the TCP frontend (--server-cert); the Unix socket is protected by its file permissions",
    );
  }
  if (f["server-cert"] && !f["server-ca-cert"] && !f["allow-anonymous-callers"]) {
    throw new ConfigError(
      "--server-cert without --server-ca-cert lets anyone who reaches the frontend open tunnels: give --server-ca-cert (mTLS) or, to accept anonymous callers on purpose, --allow-anonymous-callers",
    );
  }
  if (!f["server-cert"] && !f["insecure-frontend"] && !f["uds-name"]) {
    throw new ConfigError(
      "the frontend needs --server-cert/--server-key (TLS), --uds-name (Unix socket) or, for tests only, --insecure-frontend",
    );
  }
  if (!f["cluster-ca-cert"] && !f["agent-token-file"] && !f["agent-token"]) {
    throw new ConfigError(
      "agents must authenticate: give --cluster-ca-cert (mTLS), --agent-token-file or $KGW_AGENT_TOKEN",
    );
  }
}

/**
 * Hosted mode: every credential comes from the tenant store, so the flags that configure the
 * drop-in's own credentials would be a second, unscoped way in and are refused.
 */
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

const INSTALL_FLAGS = [
  "install-gateway-address",
  "install-port",
  "install-bind-address",
  "install-ca-bundle",
  "install-agent-image",
  "install-namespace",
] as const;

/** The install route is off unless its address is given: nothing is served by surprise. */
function parseInstall(f: ServerFlagValues): InstallOptions | null {
  if (!f["install-gateway-address"]) {
    const stray = INSTALL_FLAGS.find((flag) => flag !== "install-namespace" && f[flag]);
    if (stray || f["install-namespace"] !== DEFAULT_NAMESPACE) {
      throw new ConfigError(`--${stray ?? "install-namespace"} needs --install-gateway-address`);
    }
    return null;
  }
  const gateway = parseGatewayAddress(f["install-gateway-address"]);
  if ("error" in gateway) throw new ConfigError(`--install-gateway-address: ${gateway.error}`);
  if (f["install-bind-address"] && !f["install-port"]) {
    throw new ConfigError("--install-bind-address needs --install-port");
  }
  const asConfig = <T>(flag: string, fn: () => T): T => {
    try {
      return fn();
    } catch (err) {
      throw new ConfigError(`--${flag}: ${(err as { reason?: string }).reason ?? (err as Error).message}`);
    }
  };
  return {
    gateway,
    caBundle: f["install-ca-bundle"] || f["tenant-ca-cert"],
    image: f["install-agent-image"]
      ? asConfig("install-agent-image", () => checkImage(f["install-agent-image"]))
      : undefined,
    namespace: asConfig("install-namespace", () => checkNamespace(f["install-namespace"])),
    listener: f["install-port"] ? { port: f["install-port"], host: f["install-bind-address"] } : null,
  };
}

function parseTenancy(f: ServerFlagValues): TenancyOptions | null {
  if (f["tenant-store-dir"] && f["registry-table"]) {
    throw new ConfigError(
      "--tenant-store-dir cannot be used with --registry-table: a fleet's tenants are in its table",
    );
  }
  const storeFlag = f["registry-table"] ? "--registry-table" : "--tenant-store-dir";
  if (!f["tenant-store-dir"] && !f["registry-table"]) {
    const stray = INSTALL_FLAGS.find((flag) => flag !== "install-namespace" && f[flag]);
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
    install: parseInstall(f),
    store: f["registry-table"]
      ? { kind: "dynamodb", table: f["registry-table"] }
      : { kind: "dir", dir: f["tenant-store-dir"] },
    caCert: f["tenant-ca-cert"],
    watchIntervalMs: interval,
    udsTenant: f["uds-tenant"] || null,
  };
}
