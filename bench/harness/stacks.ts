/**
 * Starting the systems under test, each piece in its own process, on loopback only:
 *  - the backend (source/sink) and the helpers (relay, delay proxy): bench/harness/helper-main.ts;
 *  - ours: `node bin/kgw.js server` and `node bin/kgw.js agent`, TLS on both legs (frontend
 *    mTLS, agent TLS + token), as an operator runs them; or the same in tenant mode, every role
 *    on the agent port (tenant-stack.ts sets up its tenant);
 *  - upstream: proxy-server (one per frontend mode) and proxy-agent with mTLS for the agent.
 * A delay proxy, when asked for, sits between agent and server (between the two relays for the
 * relay chain). Everything started is registered in the scenario's scope and stopped with it.
 */
import { request } from "node:http";
import path from "node:path";
import { AGENT_TOKEN } from "./pki.js";
import { freePort, LOOPBACK } from "./ports.js";
import { Child } from "./procs.js";
import { REPO_ROOT } from "./repo.js";
import type { BenchContext } from "./types.js";
import { waitUntil } from "./util.js";
import { KGW_LOG_FLAGS, UPSTREAM_LOG_FLAGS } from "./verbosity.js";

/** What starting processes needs: the PKI, a scope to stop them with, files for their output. */
export type StackContext = Pick<BenchContext, "pki" | "scope" | "output"> & {
  options: Pick<BenchContext["options"], "profileDir">;
  /** Extra environment for our processes (the soak's heap probe). */
  childEnv?: Record<string, string>;
  /**
   * Told as soon as a server process is spawned, before it listens, with its agent port (the
   * scale scenario times how long it takes to listen).
   */
  onServerSpawn?: (server: Child, agentPort: number) => void;
};

export const NODE = process.execPath;
/** `KGW_BENCH_BIN` runs another build's CLI (e.g. a worktree of an older commit) against this harness. */
export const KGW_BIN = process.env.KGW_BENCH_BIN ?? path.join(REPO_ROOT, "bin", "kgw.js");
const HELPER = path.join(REPO_ROOT, "bench", "harness", "helper-main.ts");
const START_MS = 20_000;

export interface Endpoint {
  port: number;
  child: Child;
}

async function startHelper(ctx: StackContext, name: string, args: string[]): Promise<Endpoint> {
  const child = new Child(name, ctx.output.fileFor(name), NODE, ["--import", "tsx", HELPER, ...args]);
  ctx.scope.defer(() => child.stop());
  const line = await child.waitForLine((l) => l.startsWith('{"port"'), START_MS);
  return { port: (JSON.parse(line) as { port: number }).port, child };
}

export function startBackend(ctx: StackContext): Promise<Endpoint> {
  return startHelper(ctx, "backend", ["backend"]);
}

/** The HTTP front (http-backend.ts), for clients that speak HTTP through a tunnel (curl). */
export function startHttpBackend(ctx: StackContext): Promise<Endpoint> {
  return startHelper(ctx, "http-backend", ["http-backend"]);
}

export function startDelay(ctx: StackContext, targetPort: number, delayMs: number): Promise<Endpoint> {
  return startHelper(ctx, `delay-${delayMs}ms`, [
    "delay",
    `--target-port=${targetPort}`,
    `--delay-ms=${delayMs}`,
  ]);
}

/** One plain relay hop in front of `targetPort`. */
export function startRelay(ctx: StackContext, targetPort: number): Promise<Endpoint> {
  return startHelper(ctx, "relay", ["relay", `--target-port=${targetPort}`]);
}

export interface RelayChain {
  /** Where clients connect (the first relay). */
  port: number;
  /** Plays the gateway's part: holds the client's connection. */
  first: Child;
  /** Plays the agent's part: holds the connection to the backend. */
  second: Child;
  delay: Child | null;
}

/** client → relay → [delay proxy →] relay → backend. */
export async function startRelayChain(
  ctx: StackContext,
  backendPort: number,
  delayMsEachWay?: number,
): Promise<RelayChain> {
  const second = await startHelper(ctx, "relay-2", ["relay", `--target-port=${backendPort}`]);
  const delay = delayMsEachWay === undefined ? null : await startDelay(ctx, second.port, delayMsEachWay);
  const first = await startHelper(ctx, "relay-1", ["relay", `--target-port=${(delay ?? second).port}`]);
  return { port: first.port, first: first.child, second: second.child, delay: delay?.child ?? null };
}

export type FrontendMode = "grpc" | "connect";

export interface TunnelStack {
  label: string;
  /** Frontend modes this server serves (ours: both; upstream: the one it was started with). */
  modes: FrontendMode[];
  /** Where callers connect: the frontend port, or in tenant mode the agent port. */
  frontendPort: number;
  agentPort: number;
  healthPort: number;
  /** /metrics, and (ours) per-tenant readiness at /readyz?tenant=T. */
  adminPort: number;
  server: Child;
  agent: Child | null;
  delay: Child | null;
}

export interface StackOptions {
  /** Start the agent (default true); the memory scenario plays the agents itself. */
  agent?: boolean;
  /** A delay proxy between agent and server, this many ms each way. */
  delayMsEachWay?: number;
}

export function httpStatus(port: number, urlPath: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: LOOPBACK, port, path: urlPath, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

async function waitHealthy(stack: TunnelStack, withAgent: boolean): Promise<void> {
  const what = withAgent ? "/readyz" : "/healthz";
  await waitUntil(
    async () => {
      if (!stack.server.alive) throw new Error("server exited");
      return (await httpStatus(stack.healthPort, what)) === 200;
    },
    START_MS,
    `${stack.label} ${what}`,
    () => [stack.server.tail(), stack.agent?.tail() ?? ""].join("\n"),
  );
}

/** Node flags for our processes: CPU profiles when --profile is given. */
export function nodeFlags(ctx: StackContext, name: string): string[] {
  const dir = ctx.options.profileDir;
  return dir
    ? ["--cpu-prof", `--cpu-prof-dir=${dir}`, `--cpu-prof-name=${name}-${Date.now()}.cpuprofile`]
    : [];
}

/**
 * Tenant mode: credentials from a tenant store instead of the drop-in's own flags, and callers
 * on the agent port with the agents, where a tenant's kube-apiserver dials (tenant-stack.ts).
 */
export interface KgwTenancy {
  storeDir: string;
  /** Chosen before the server starts: the tenant's bundle names it as the gateway address. */
  agentPort: number;
  /** The tenant's agent token, for our agent. */
  agentToken: string;
}

/** How callers and agents authenticate: the drop-in's mTLS frontend and token, or tenant mode. */
function authFlags(ctx: StackContext, frontendPort: number, tenancy?: KgwTenancy): string[] {
  const f = ctx.pki.files;
  if (tenancy) {
    return [
      `--tenant-store-dir=${tenancy.storeDir}`,
      `--tenant-ca-cert=${f.caCert}`,
      // Quotas far above what the benchmark asks: every dial still goes through the check, so its
      // cost is in the figures, but no dial is refused for it (the drop-in has no quotas).
      "--tenant-max-tunnels=1000000",
      "--tenant-dial-rate=100000",
      "--tenant-dial-burst=1000000",
    ];
  }
  return [
    `--server-port=${frontendPort}`,
    `--server-bind-address=${LOOPBACK}`,
    `--server-cert=${f.serverCert}`,
    `--server-key=${f.serverKey}`,
    `--server-ca-cert=${f.caCert}`,
  ];
}

/** A kgw server without an agent; `startKgwAgent` adds agents. */
export async function startKgwServer(ctx: StackContext, tenancy?: KgwTenancy): Promise<TunnelStack> {
  const f = ctx.pki.files;
  // In tenant mode callers come to the agent port: there is no frontend port of its own.
  const [frontendPort, agentPort, adminPort, healthPort] = await Promise.all([
    tenancy?.agentPort ?? freePort(),
    tenancy?.agentPort ?? freePort(),
    freePort(),
    freePort(),
  ]);
  const label = tenancy ? "kgw-tenant" : "kgw";
  const server = new Child(
    `${label}-server`,
    ctx.output.fileFor(`${label}-server`),
    NODE,
    [
      ...nodeFlags(ctx, `${label}-server`),
      KGW_BIN,
      "server",
      `--server-id=bench-${label}`,
      ...authFlags(ctx, frontendPort, tenancy),
      `--agent-port=${agentPort}`,
      `--agent-bind-address=${LOOPBACK}`,
      `--cluster-cert=${f.serverCert}`,
      `--cluster-key=${f.serverKey}`,
      `--admin-port=${adminPort}`,
      `--admin-bind-address=${LOOPBACK}`,
      `--health-port=${healthPort}`,
      `--health-bind-address=${LOOPBACK}`,
      "--graceful-shutdown-timeout=1s",
      ...KGW_LOG_FLAGS,
    ],
    // Tenant mode refuses the drop-in's token: agents' tokens come from the store.
    { ...(tenancy ? {} : { KGW_AGENT_TOKEN: AGENT_TOKEN }), ...ctx.childEnv },
  );
  ctx.onServerSpawn?.(server, agentPort);
  // Profiles are written at a normal exit: give the graceful shutdown time to finish.
  ctx.scope.defer(() => server.stop(8000));
  const stack: TunnelStack = {
    label,
    modes: ["grpc", "connect"],
    frontendPort,
    agentPort,
    healthPort,
    adminPort,
    server,
    agent: null,
    delay: null,
  };
  await waitHealthy(stack, false);
  return stack;
}

export interface KgwAgentOptions {
  /** Connect through this port instead of the server's agent port (a delay proxy). */
  viaPort?: number;
  /** Default `bench-agent`. */
  agentId?: string;
  /** Default AGENT_TOKEN, the drop-in's; in tenant mode the tenant's agent token. */
  token?: string;
}

/** Our agent, connected to `stack`'s server; resolves once the agent says it is ready. */
export async function startKgwAgent(
  ctx: StackContext,
  stack: TunnelStack,
  opts: KgwAgentOptions = {},
): Promise<Child> {
  const healthPort = await freePort();
  const name = `${stack.label}-agent${opts.agentId ? `-${opts.agentId}` : ""}`;
  const child = new Child(
    name,
    ctx.output.fileFor(name),
    NODE,
    [
      ...nodeFlags(ctx, name),
      KGW_BIN,
      "agent",
      `--proxy-server-host=${LOOPBACK}`,
      `--proxy-server-port=${opts.viaPort ?? stack.agentPort}`,
      "--server-name=localhost",
      `--ca-cert=${ctx.pki.files.caCert}`,
      `--agent-id=${opts.agentId ?? "bench-agent"}`,
      `--health-server-host=${LOOPBACK}`,
      `--health-server-port=${healthPort}`,
      `--admin-bind-address=${LOOPBACK}`,
      `--admin-server-port=${await freePort()}`,
      "--sync-interval=200ms",
      ...KGW_LOG_FLAGS,
    ],
    { KGW_AGENT_TOKEN: opts.token ?? AGENT_TOKEN, ...ctx.childEnv },
  );
  ctx.scope.defer(() => child.stop(8000));
  await waitUntil(
    async () => {
      if (!child.alive) throw new Error("agent exited");
      return (await httpStatus(healthPort, "/readyz")) === 200;
    },
    START_MS,
    `${name} /readyz`,
    () => [child.tail(), stack.server.tail()].join("\n"),
  );
  return child;
}

export async function startKgw(
  ctx: StackContext,
  opts: StackOptions = {},
  tenancy?: KgwTenancy,
): Promise<TunnelStack> {
  const stack = await startKgwServer(ctx, tenancy);
  if (opts.agent === false) return stack;
  const delay =
    opts.delayMsEachWay === undefined ? null : await startDelay(ctx, stack.agentPort, opts.delayMsEachWay);
  stack.delay = delay?.child ?? null;
  stack.agent = await startKgwAgent(ctx, stack, { viaPort: delay?.port, token: tenancy?.agentToken });
  await waitHealthy(stack, true);
  return stack;
}

export async function startUpstream(
  ctx: StackContext & Pick<BenchContext, "upstream">,
  mode: FrontendMode,
  opts: StackOptions = {},
): Promise<TunnelStack> {
  const bins = ctx.upstream;
  if (!bins) throw new Error("upstream binaries not available");
  const f = ctx.pki.files;
  const [frontendPort, agentPort, adminPort, healthPort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const label = `upstream-${mode}`;
  const server = new Child(`${label}-server`, ctx.output.fileFor(`${label}-server`), bins.server, [
    `--mode=${mode === "grpc" ? "grpc" : "http-connect"}`,
    `--server-id=bench-${label}`,
    "--server-count=1",
    `--server-port=${frontendPort}`,
    `--server-bind-address=${LOOPBACK}`,
    `--server-cert=${f.serverCert}`,
    `--server-key=${f.serverKey}`,
    `--server-ca-cert=${f.caCert}`,
    `--agent-port=${agentPort}`,
    `--agent-bind-address=${LOOPBACK}`,
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    // Agents authenticate with client certificates: no --agent-namespace, so no TokenReview.
    `--cluster-ca-cert=${f.caCert}`,
    `--admin-port=${adminPort}`,
    `--admin-bind-address=${LOOPBACK}`,
    `--health-port=${healthPort}`,
    `--health-bind-address=${LOOPBACK}`,
    ...UPSTREAM_LOG_FLAGS,
  ]);
  ctx.onServerSpawn?.(server, agentPort);
  ctx.scope.defer(() => server.stop());
  const stack: TunnelStack = {
    label,
    modes: [mode],
    frontendPort,
    agentPort,
    healthPort,
    adminPort,
    server,
    agent: null,
    delay: null,
  };
  if (opts.agent === false) {
    await waitHealthy(stack, false);
    return stack;
  }
  const delay =
    opts.delayMsEachWay === undefined ? null : await startDelay(ctx, agentPort, opts.delayMsEachWay);
  stack.delay = delay?.child ?? null;
  const agent = new Child(`${label}-agent`, ctx.output.fileFor(`${label}-agent`), bins.agent, [
    `--proxy-server-host=${LOOPBACK}`,
    `--proxy-server-port=${delay?.port ?? agentPort}`,
    `--ca-cert=${f.caCert}`,
    `--agent-cert=${f.agentCert}`,
    `--agent-key=${f.agentKey}`,
    `--agent-id=bench-${label}-agent`,
    `--health-server-host=${LOOPBACK}`,
    `--health-server-port=${await freePort()}`,
    `--admin-bind-address=${LOOPBACK}`,
    `--admin-server-port=${await freePort()}`,
    "--sync-interval=200ms",
    ...UPSTREAM_LOG_FLAGS,
  ]);
  ctx.scope.defer(() => agent.stop());
  stack.agent = agent;
  await waitHealthy(stack, true);
  return stack;
}
