/**
 * `kgw server`'s flag table: every flag with its default and help, in the order `--help` lists
 * them, and the type of its parsed values. Parsing and validation are in server-options.ts; each
 * sub-parser (fleet, peer, tenancy, install, the drop-in's auth) declares the slice it reads, so
 * none of them needs this whole table.
 */

import { DEFAULT_DIAL_TIMEOUT_MS } from "../tunnel/durations.js";
import { LOGTOSTDERR_FLAG } from "./compat-flags.js";
import { defineFlags, type FlagValues } from "./flags.js";
import { FLEET_FLAGS } from "./fleet-options.js";
import { INSTALL_FLAGS } from "./install-options.js";
import { LOG_LEVEL_FLAG } from "./log-level.js";
import { METRICS_EMF_FLAGS } from "./metrics-emf-options.js";
import { PEER_FLAGS } from "./peer-options.js";
import { PORTS_FILE_FLAG } from "./ports-file-flag.js";
import { TENANCY_FLAGS } from "./server-tenancy-options.js";

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
    help: "An agent silent this long is pinged (at most 30 pings a second for all agents: with more than 150 idle ones each is asked less often); one that does not answer within 2s gets no new dials until it does (0 disables).",
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
    help: "TLS handshakes in progress per listener (agent port, frontend); a new connection beyond it waits its turn (--max-tls-handshakes-waiting), or is closed when nothing may wait (0: no limit).",
  },
  "max-tls-handshakes-per-source": {
    kind: "int",
    default: 64,
    help: "TLS handshakes in progress from one source address (IPv6: one /64) per listener; a new connection beyond it waits its turn, behind the others of its source (0: no limit).",
  },
  "max-tls-handshakes-waiting": {
    kind: "int",
    // A large cluster behind one NAT address reconnecting at once: 2,000 agents need about as
    // many places to wait (docs/CONFIGURATION.md). Each costs a descriptor and its ClientHello.
    default: 2048,
    help: "Connections per listener that wait, accepted, for their TLS handshake to start while a handshake limit holds them back (at most --tls-handshake-timeout; at most a quarter of the process's open-files limit); beyond it they are closed at once (0: none wait).",
  },
  "max-tls-handshake-rate": {
    kind: "int",
    // About 1 ms of CPU for the handshake and 2.2 ms for a whole agent registration, on the one
    // thread that serves everything: 300 a second keeps the handshakes of a sustained reconnect
    // storm to a third to half of that thread, about what one instance sustains of CONNECT dials
    // (4.4 ms each) besides (docs/CONFIGURATION.md, docs/PERFORMANCE.md).
    default: 300,
    help: "New TLS handshakes a second per listener, once --max-tls-handshake-burst is spent (a token bucket); connections over it wait their turn, or are reset before TLS when nothing may wait (0: no limit).",
  },
  "max-tls-handshake-burst": {
    kind: "int",
    // A cluster's worth: 2,000 agents reconnecting at once start as fast as the thread completes
    // their handshakes (2.4-3.2 s of it), not at the rate; a longer storm is paced after them.
    default: 2048,
    help: "TLS handshakes per listener that may start at once after a quiet spell, beyond which --max-tls-handshake-rate paces them (the size of its token bucket; 0: one second's worth).",
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
  "dial-step-metrics": {
    kind: "bool",
    default: false,
    help: "Time each step of every CONNECT dial in kgw_server_dial_step_seconds{step} on /metrics (profiling; off costs nothing).",
  },
  "tenant-metrics-limit": {
    kind: "int",
    default: 1000,
    help: 'Tenants with their own label in the kgw_tenant_* metrics; the rest are counted as tenant="_other" (0: all of them).',
  },
  ...METRICS_EMF_FLAGS,
  "log-level": LOG_LEVEL_FLAG,
  logtostderr: LOGTOSTDERR_FLAG,
  "ports-file": PORTS_FILE_FLAG,
});

export type ServerFlagValues = FlagValues<typeof SERVER_FLAGS>;
