/**
 * Everything `kgw agent` can be told, in one place: flag table, defaults, validation. The
 * entrypoint calls `parseAgentOptions(argv, env)` once and passes the plain object down; nothing
 * under lib/agent reads the environment. Flag names and meanings follow upstream proxy-agent;
 * `--agent-token`, `--dial-timeout`, `--drain-timeout`, `--server-name` and
 * `--allow-link-local-destinations` are ours.
 */
import { randomUUID } from "node:crypto";
import { ConfigError } from "../errors.js";
import { LOGTOSTDERR_FLAG } from "./compat-flags.js";
import { defineFlags, formatHelp, parseFlags } from "./flags.js";
import { LOG_LEVEL_FLAG, type LogLevel, parseLogLevel } from "./log-level.js";
import { PORTS_FILE_FLAG } from "./ports-file-flag.js";

export const AGENT_FLAGS = defineFlags({
  "proxy-server-host": {
    kind: "string",
    default: "127.0.0.1",
    help: "Host name of the proxy server (or of the load balancer in front of several).",
  },
  "proxy-server-port": { kind: "port", default: 8132, help: "Agent port of the proxy server." },
  "server-name": {
    kind: "string",
    default: "",
    help: "Name to expect in the server certificate and to send as SNI (default: --proxy-server-host).",
  },
  "ca-cert": {
    kind: "string",
    default: "",
    help: "CA that signed the server certificate (PEM); the system roots when empty.",
  },
  "agent-cert": {
    kind: "string",
    default: "",
    help: "Client certificate for mTLS (PEM); needs --agent-key.",
  },
  "agent-key": {
    kind: "string",
    default: "",
    help: "Client private key for mTLS (PEM); needs --agent-cert.",
  },
  "agent-id": {
    kind: "string",
    default: "",
    help: "Unique ID of this agent (a random UUID when empty).",
    env: "PROXY_AGENT_ID",
  },
  "agent-identifiers": {
    kind: "string",
    default: "",
    help: "URL-encoded identifiers servers route by, e.g. host=node1&ipv4=10.0.0.5&cidr=10.0.0.0/16&default-route=true.",
  },
  "service-account-token-path": {
    kind: "string",
    default: "",
    help: "File holding a bearer token sent to the server; re-read on every connect (kubelet rotates it).",
  },
  "agent-token": {
    kind: "string",
    default: "",
    help: "Inline bearer token (prefer the environment or --service-account-token-path).",
    env: "KGW_AGENT_TOKEN",
  },
  "sync-interval": {
    kind: "duration",
    default: 1_000,
    help: "First retry delay after a failed connect; also the pause between connects while servers are missing, and the window a reconnect after losing a server is spread over.",
  },
  "sync-interval-cap": {
    kind: "duration",
    default: 10_000,
    help: "Longest retry delay after repeated failures.",
  },
  "sync-forever": {
    kind: "bool",
    default: true,
    help: "Accepted for upstream compatibility; the agent always keeps its server connections in sync.",
  },
  "probe-interval": {
    kind: "duration",
    default: 1_000,
    help: "How often each server connection's transport is checked; a broken one is dropped and replaced.",
  },
  "server-transport": {
    kind: "string",
    default: "auto",
    help: "auto: offer kgw-tunnel/1 (our server's faster agent transport, chosen by ALPN) and fall back to gRPC; grpc: always gRPC.",
  },
  "keepalive-time": {
    kind: "duration",
    default: 3_600_000,
    help: "gRPC keepalive ping interval towards a server not known to be ours (upstream's refuses pings more often than every 30s); 0 disables. Ours are pinged after 5s of silence on either transport regardless.",
  },
  "dial-timeout": {
    kind: "duration",
    default: 10_000,
    help: "How long a TCP connect to a backend may take.",
  },
  "allow-link-local-destinations": {
    kind: "bool",
    default: false,
    help: "Let callers reach link-local addresses (169.254.0.0/16, fe80::/10) and cloud metadata (fd00:ec2::254, fd20:ce::254); refused by default.",
  },
  "drain-timeout": {
    kind: "duration",
    default: 25_000,
    help: "After the first SIGTERM, how long open connections may finish before the agent exits.",
  },
  "health-server-host": { kind: "string", default: "", help: "Health bind address (all if empty)." },
  "health-server-port": { kind: "port", default: 8093, help: "Health port (/healthz, /readyz)." },
  "admin-bind-address": { kind: "string", default: "127.0.0.1", help: "Admin bind address." },
  "admin-server-port": { kind: "port", default: 8094, help: "Admin port (/metrics)." },
  "log-level": LOG_LEVEL_FLAG,
  logtostderr: LOGTOSTDERR_FLAG,
  "ports-file": PORTS_FILE_FLAG,
});

/**
 * grpc-go raises any client keepalive below 10s to 10s, and servers enforcing a ping policy
 * answer faster pings with GOAWAY; refusing them here gives a clear error instead.
 */
export const MIN_KEEPALIVE_MS = 10_000;

/** Identifier kinds upstream accepts in --agent-identifiers; anything else is a typo. */
const IDENTIFIER_KEYS = new Set(["host", "ipv4", "ipv6", "cidr", "default-route"]);

export const SERVER_TRANSPORTS = ["auto", "grpc"] as const;
export type ServerTransport = (typeof SERVER_TRANSPORTS)[number];

export interface AgentOptions {
  agentId: string;
  /** Sent verbatim as the agentIdentifiers metadata; "" sends none. */
  agentIdentifiers: string;
  server: {
    host: string;
    port: number;
    /** TLS verification / SNI name; equals `host` unless --server-name overrides it. */
    serverName: string;
    /** 0 disables keepalive pings. */
    keepaliveMs: number;
    transport: ServerTransport;
  };
  tls: {
    /** "" uses the system roots. */
    caCert: string;
    /** Both "" or both set. */
    agentCert: string;
    agentKey: string;
  };
  auth: {
    /** Re-read on every connect attempt. */
    tokenPath: string;
    /** Inline token. Never logged. */
    token: string;
  };
  sync: {
    intervalMs: number;
    intervalCapMs: number;
    probeIntervalMs: number;
  };
  dialTimeoutMs: number;
  /** The drop-in destination policy (lib/agent/destination-policy.ts). */
  destinations: { allowLinkLocal: boolean };
  drainTimeoutMs: number;
  health: { host: string; port: number };
  admin: { host: string; port: number };
  logLevel: LogLevel;
  /** Where to announce the bound ports (--ports-file); absent or null: nowhere. */
  portsFile?: string | null;
}

/**
 * Validates like upstream's `url.ParseQuery` plus its key check: malformed escapes and `;`
 * separators are errors (Go refuses both), and only known identifier kinds are accepted.
 */
export function validateAgentIdentifiers(encoded: string): void {
  if (encoded === "") return;
  if (encoded.includes(";")) throw new ConfigError("--agent-identifiers: use & between pairs, not ;");
  const badEscape = /%(?![0-9a-fA-F]{2})/.exec(encoded);
  if (badEscape)
    throw new ConfigError(`--agent-identifiers: invalid %-escape at "${encoded.slice(badEscape.index)}"`);
  for (const key of new URLSearchParams(encoded).keys()) {
    if (!IDENTIFIER_KEYS.has(key)) {
      throw new ConfigError(
        `--agent-identifiers: unknown identifier "${key}" (use ${[...IDENTIFIER_KEYS].join(", ")})`,
      );
    }
  }
}

export const AGENT_USAGE = "kgw agent [flags]";
export const agentHelp = (): string =>
  formatHelp(
    AGENT_USAGE,
    "Runs the in-cluster agent: dials out to the proxy server(s) and opens the TCP connections they ask for.",
    AGENT_FLAGS,
  );

export type ParsedAgentOptions = { help: true } | { help: false; options: AgentOptions };

export function parseAgentOptions(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
): ParsedAgentOptions {
  const { values: f, help } = parseFlags(AGENT_FLAGS, argv, env);
  if (help) return { help: true };

  if (f["proxy-server-host"] === "") throw new ConfigError("--proxy-server-host must not be empty");
  if (f["proxy-server-port"] === 0) throw new ConfigError("--proxy-server-port must be between 1 and 65535");
  if (Boolean(f["agent-cert"]) !== Boolean(f["agent-key"])) {
    throw new ConfigError("--agent-cert and --agent-key must be given together");
  }
  if (f["service-account-token-path"] && f["agent-token"]) {
    throw new ConfigError(
      "--service-account-token-path and --agent-token/$KGW_AGENT_TOKEN are exclusive; choose one",
    );
  }
  if (/\s/.test(f["agent-token"])) throw new ConfigError("--agent-token must not contain whitespace");
  validateAgentIdentifiers(f["agent-identifiers"]);
  if (f["sync-interval"] <= 0) throw new ConfigError("--sync-interval must be positive");
  if (f["sync-interval"] > f["sync-interval-cap"]) {
    throw new ConfigError("--sync-interval must not exceed --sync-interval-cap");
  }
  if (f["probe-interval"] <= 0) throw new ConfigError("--probe-interval must be positive");
  const keepalive = f["keepalive-time"];
  if (keepalive !== 0 && keepalive < MIN_KEEPALIVE_MS) {
    throw new ConfigError("--keepalive-time must be 0 (off) or at least 10s");
  }
  const transport = f["server-transport"];
  if (!(SERVER_TRANSPORTS as readonly string[]).includes(transport)) {
    throw new ConfigError(`--server-transport must be one of ${SERVER_TRANSPORTS.join(", ")}`);
  }
  if (f["dial-timeout"] <= 0) throw new ConfigError("--dial-timeout must be positive: a dial may not hang");

  return {
    help: false,
    options: {
      agentId: f["agent-id"] || randomUUID(),
      agentIdentifiers: f["agent-identifiers"],
      server: {
        host: f["proxy-server-host"],
        port: f["proxy-server-port"],
        serverName: f["server-name"] || f["proxy-server-host"],
        keepaliveMs: keepalive,
        transport: transport as ServerTransport,
      },
      tls: { caCert: f["ca-cert"], agentCert: f["agent-cert"], agentKey: f["agent-key"] },
      auth: { tokenPath: f["service-account-token-path"], token: f["agent-token"] },
      sync: {
        intervalMs: f["sync-interval"],
        intervalCapMs: f["sync-interval-cap"],
        probeIntervalMs: f["probe-interval"],
      },
      dialTimeoutMs: f["dial-timeout"],
      destinations: { allowLinkLocal: f["allow-link-local-destinations"] },
      drainTimeoutMs: f["drain-timeout"],
      health: { host: f["health-server-host"], port: f["health-server-port"] },
      admin: { host: f["admin-bind-address"], port: f["admin-server-port"] },
      logLevel: parseLogLevel(f["log-level"]),
      portsFile: f["ports-file"] || null,
    },
  };
}
