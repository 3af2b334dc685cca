/**
 * The Konnectivity pieces under test, each a real process in the suite's namespace: our `kgw
 * server` and `kgw agent` (the CLI, from source through tsx) and upstream's proxy-server and
 * proxy-agent. Every flag we pass to our own programs is in kgwServerFlags, kgwTenantServerFlags
 * and kgwAgentFlags.
 */
import fs from "node:fs";
import { request } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TestPki } from "../helpers/pki.js";
import { type Proc, promValue, waitUntil } from "../interop/harness.js";
import type { EgressSockets } from "./control-plane.js";
import type { NetNs } from "./netns.js";
import {
  AGENT_PORTS,
  type EgressTransport,
  FRONTEND_PORT,
  KGW_PORTS,
  KGW_TENANT_PORTS,
  UPSTREAM_SERVER_PORTS,
} from "./topology.js";

/** Our CLI from source through tsx: the server, the agent and `kgw tenant` are all this program. */
export const KGW_ENTRY = fileURLToPath(new URL("../helpers/kgw-entry.ts", import.meta.url));
/** The bearer token our agent presents to our server (from a file, as a projected token would be). */
const AGENT_TOKEN = "kgw-kube-suite-agent-token-0123456789";

/** Plain HTTP GET to a port inside the namespace, through the bridge's Unix socket. */
export function nsGet(
  bridgeDir: string,
  port: number,
  urlPath: string,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath: path.join(bridgeDir, `${port}.sock`), path: urlPath, agent: false, timeout: 5000 },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => {
          body += c;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

/** A proxy server (ours or upstream's) as the test sees it: metrics and readiness. */
export interface ProxyServer {
  name: string;
  proc: Proc;
  agentPort: number;
  adminPort: number;
  healthPort: number;
  /** Successful dials so far (`konnectivity_network_proxy_server_dial_duration_seconds_count`). */
  dials(): Promise<number>;
  /** Agents connected (`…_ready_backend_connections`). */
  agents(): Promise<number>;
  stop(): Promise<void>;
}

function proxyServer(
  name: string,
  proc: Proc,
  bridgeDir: string,
  ports: { agent: number; admin: number; health: number },
  onStop: () => void = () => {},
): ProxyServer {
  const metric = async (metricName: string) => {
    const res = await nsGet(bridgeDir, ports.admin, "/metrics");
    if (res.status !== 200) throw new Error(`${name} /metrics: ${res.status}`);
    return promValue(res.body, metricName);
  };
  return {
    name,
    proc,
    agentPort: ports.agent,
    adminPort: ports.admin,
    healthPort: ports.health,
    dials: () => metric("konnectivity_network_proxy_server_dial_duration_seconds_count"),
    agents: () => metric("konnectivity_network_proxy_server_ready_backend_connections"),
    stop: async () => {
      await proc.stop();
      onStop();
    },
  };
}

async function waitHealthy(server: ProxyServer, bridgeDir: string): Promise<ProxyServer> {
  await waitUntil(
    async () => (await nsGet(bridgeDir, server.healthPort, "/healthz")).status === 200,
    20_000,
    () => server.proc.tail(),
  );
  return server;
}

// ---------------------------------------------------------------------------------------------
// Ours

/**
 * `kgw server` as a drop-in konnectivity-server next to kube-apiserver: mTLS on the TCP frontend
 * (kube-apiserver's HTTPConnect over TCP presents a client certificate), the Unix socket, agents
 * by token or client certificate. Both protocols are served on one socket, so the socket the
 * HTTPConnect kube-apiserver dials is a symlink to the one the GRPC kube-apiserver dials.
 */
export function kgwServerFlags(pki: TestPki, sockets: EgressSockets, agentTokenFile: string): string[] {
  const f = pki.files;
  return [
    "--server-id=kgw-1",
    `--server-port=${FRONTEND_PORT}`,
    "--server-bind-address=127.0.0.1",
    `--server-cert=${f.serverCert}`,
    `--server-key=${f.serverKey}`,
    `--server-ca-cert=${f.caCert}`,
    `--uds-name=${sockets.grpc}`,
    "--delete-existing-uds-file",
    `--agent-port=${KGW_PORTS.agent}`,
    "--agent-bind-address=127.0.0.1",
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    `--cluster-ca-cert=${f.caCert}`,
    `--agent-token-file=${agentTokenFile}`,
    `--admin-port=${KGW_PORTS.admin}`,
    "--admin-bind-address=127.0.0.1",
    `--health-port=${KGW_PORTS.health}`,
    "--health-bind-address=127.0.0.1",
    "--graceful-shutdown-timeout=2s",
  ];
}

export async function startKgwServer(
  ns: NetNs,
  bridgeDir: string,
  pki: TestPki,
  sockets: EgressSockets,
  dir: string,
): Promise<ProxyServer> {
  const tokenFile = path.join(dir, "agent-tokens");
  fs.writeFileSync(tokenFile, `${AGENT_TOKEN}\n`, { mode: 0o600 });
  const proc = ns.spawn("kgw server", process.execPath, [
    "--import",
    "tsx",
    KGW_ENTRY,
    "server",
    ...kgwServerFlags(pki, sockets, tokenFile),
  ]);
  fs.rmSync(sockets.connect, { force: true });
  fs.symlinkSync(sockets.grpc, sockets.connect);
  const server = proxyServer("kgw server", proc, bridgeDir, KGW_PORTS, () =>
    fs.rmSync(sockets.connect, { force: true }),
  );
  return waitHealthy(server, bridgeDir);
}

/**
 * `kgw server` in tenant mode, the hosted gateway: credentials come from the tenant store, checked
 * against the gateway CA (the suite's CA, which `kgw tenant` issues with), and the agent port
 * serves agents and tenants' kube-apiservers alike. The store is re-read every 500 ms, so a
 * revocation takes effect well within the suite's 5 s bounds.
 */
export function kgwTenantServerFlags(pki: TestPki, storeDir: string): string[] {
  const f = pki.files;
  return [
    "--server-id=kgw-tenants",
    `--tenant-store-dir=${storeDir}`,
    `--tenant-ca-cert=${f.caCert}`,
    "--tenant-watch-interval=500ms",
    `--agent-port=${KGW_TENANT_PORTS.agent}`,
    "--agent-bind-address=127.0.0.1",
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    `--admin-port=${KGW_TENANT_PORTS.admin}`,
    "--admin-bind-address=127.0.0.1",
    `--health-port=${KGW_TENANT_PORTS.health}`,
    "--health-bind-address=127.0.0.1",
    "--graceful-shutdown-timeout=2s",
  ];
}

export async function startKgwTenantServer(
  ns: NetNs,
  bridgeDir: string,
  pki: TestPki,
  storeDir: string,
): Promise<ProxyServer> {
  const proc = ns.spawn("kgw server (tenant mode)", process.execPath, [
    "--import",
    "tsx",
    KGW_ENTRY,
    "server",
    ...kgwTenantServerFlags(pki, storeDir),
  ]);
  return waitHealthy(proxyServer("kgw server (tenant mode)", proc, bridgeDir, KGW_TENANT_PORTS), bridgeDir);
}

export interface AgentAuth {
  /** Our server: the bearer token, from a file as a projected service-account token would be. */
  tokenFile?: string;
  /** Upstream's server (no TokenReview here): a client certificate. */
  cert?: { cert: string; key: string };
}

export function kgwAgentFlags(
  pki: TestPki,
  serverPort: number,
  agentId: string,
  auth: AgentAuth,
  ports: { health: number; admin: number },
): string[] {
  return [
    "--proxy-server-host=127.0.0.1",
    `--proxy-server-port=${serverPort}`,
    `--ca-cert=${pki.files.caCert}`,
    `--agent-id=${agentId}`,
    ...(auth.tokenFile ? [`--service-account-token-path=${auth.tokenFile}`] : []),
    ...(auth.cert ? [`--agent-cert=${auth.cert.cert}`, `--agent-key=${auth.cert.key}`] : []),
    "--health-server-host=127.0.0.1",
    `--health-server-port=${ports.health}`,
    "--admin-bind-address=127.0.0.1",
    `--admin-server-port=${ports.admin}`,
    "--sync-interval=100ms",
    "--sync-interval-cap=500ms",
    "--probe-interval=100ms",
  ];
}

export function startKgwAgent(
  ns: NetNs,
  pki: TestPki,
  serverPort: number,
  agentId: string,
  auth: AgentAuth,
  slot: number,
): Proc {
  return ns.spawn(`kgw agent ${agentId}`, process.execPath, [
    "--import",
    "tsx",
    KGW_ENTRY,
    "agent",
    ...kgwAgentFlags(pki, serverPort, agentId, auth, AGENT_PORTS[slot]!),
  ]);
}

export function agentTokenFile(dir: string): string {
  const file = path.join(dir, "agent-token");
  // A projected service-account token has no trailing newline.
  fs.writeFileSync(file, AGENT_TOKEN, { mode: 0o600 });
  return file;
}

// ---------------------------------------------------------------------------------------------
// Upstream

/**
 * Upstream proxy-server for one transport: `--mode=http-connect` on TCP+mTLS or on the Unix
 * socket, or `--mode=grpc` on the Unix socket. Agents authenticate with client certificates.
 */
export async function startUpstreamServer(
  ns: NetNs,
  bin: string,
  bridgeDir: string,
  pki: TestPki,
  sockets: EgressSockets,
  transport: EgressTransport,
): Promise<ProxyServer> {
  const f = pki.files;
  const ports = UPSTREAM_SERVER_PORTS[transport];
  const frontend = {
    "connect-tcp": [
      "--mode=http-connect",
      `--server-port=${FRONTEND_PORT}`,
      "--server-bind-address=127.0.0.1",
      `--server-cert=${f.serverCert}`,
      `--server-key=${f.serverKey}`,
      `--server-ca-cert=${f.caCert}`,
    ],
    "grpc-uds": [
      "--mode=grpc",
      `--uds-name=${sockets.grpc}`,
      "--delete-existing-uds-file",
      "--server-port=0",
    ],
    "connect-uds": [
      "--mode=http-connect",
      `--uds-name=${sockets.connect}`,
      "--delete-existing-uds-file",
      "--server-port=0",
    ],
  }[transport];
  const proc = ns.spawn(`upstream proxy-server (${transport})`, bin, [
    ...frontend,
    `--server-id=upstream-${transport}`,
    "--server-count=1",
    `--agent-port=${ports.agent}`,
    "--agent-bind-address=127.0.0.1",
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    `--cluster-ca-cert=${f.caCert}`,
    `--admin-port=${ports.admin}`,
    "--admin-bind-address=127.0.0.1",
    `--health-port=${ports.health}`,
    "--health-bind-address=127.0.0.1",
    "--keepalive-time=30s",
    "--v=2",
  ]);
  return waitHealthy(proxyServer(`upstream proxy-server (${transport})`, proc, bridgeDir, ports), bridgeDir);
}

/** Upstream proxy-agent: by default with the suite's agent certificate, or as `auth` says. */
export function startUpstreamAgent(
  ns: NetNs,
  bin: string,
  pki: TestPki,
  serverPort: number,
  agentId: string,
  slot: number,
  auth: AgentAuth = { cert: { cert: pki.files.agentCert, key: pki.files.agentKey } },
): Proc {
  const ports = AGENT_PORTS[slot]!;
  return ns.spawn(`upstream proxy-agent ${agentId}`, bin, [
    "--proxy-server-host=127.0.0.1",
    `--proxy-server-port=${serverPort}`,
    `--ca-cert=${pki.files.caCert}`,
    ...(auth.tokenFile ? [`--service-account-token-path=${auth.tokenFile}`] : []),
    ...(auth.cert ? [`--agent-cert=${auth.cert.cert}`, `--agent-key=${auth.cert.key}`] : []),
    `--agent-id=${agentId}`,
    "--health-server-host=127.0.0.1",
    `--health-server-port=${ports.health}`,
    "--admin-bind-address=127.0.0.1",
    `--admin-server-port=${ports.admin}`,
    "--sync-interval=100ms",
    "--sync-interval-cap=500ms",
    "--probe-interval=100ms",
    "--v=2",
  ]);
}
