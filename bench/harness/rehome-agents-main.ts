/**
 * The `rehome` scenario's load generator: N agents in one process, each our agent's own client
 * set (lib/agent/client-set.ts: reconnects with full-jitter backoff from --sync-interval to
 * --sync-interval-cap, the agent's defaults) and server connections (kgw-tunnel/1, as our agent
 * connects). Only the backend side is missing: these agents dial nothing.
 *
 *   rehome-agents-main.ts --count=N --home=PORT --others=PORT,PORT --ca=FILE --token-file=FILE
 *                         [--sync-interval=MS --sync-interval-cap=MS --start-rate=PER_S]
 *
 * The address each connect goes to plays a load balancer that has already taken the dead instance
 * out: the home instance while it is alive, then the others in turn. The agents are started at
 * --start-rate a second (so that the home instance's own handshake bound does not shape the
 * start), and once all hold a stream to the home instance a line {"event":"ready"} is printed.
 * Each agent's loss of the home instance and first stream elsewhere are timed (Date.now(), the
 * parent's clock too); once every agent is elsewhere, {"event":"rehomed", ...} carries the times
 * and the connect attempts that failed meanwhile. The process then idles until SIGTERM.
 */
import { readFileSync } from "node:fs";
import { ClientSet } from "../../lib/agent/client-set.js";
import { ConnectIdAllocator } from "../../lib/agent/connect-ids.js";
import { ServerConnection } from "../../lib/agent/server-connection.js";
import { type ServerEndpoint, serverEndpoint } from "../../lib/agent/server-endpoint.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";

function flag(name: string, fallback?: string): string {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  const value = arg?.slice(name.length + 3) ?? fallback;
  if (value === undefined) throw new Error(`--${name}= is required`);
  return value;
}

const count = Number(flag("count"));
const homePort = Number(flag("home"));
const otherPorts = flag("others").split(",").map(Number);
const ca = flag("ca");
const token = readFileSync(flag("token-file"), "utf8").trim();
const syncIntervalMs = Number(flag("sync-interval", "1000"));
const syncIntervalCapMs = Number(flag("sync-interval-cap", "10000"));
const startRate = Number(flag("start-rate", "200"));

const endpointOf = (port: number): ServerEndpoint =>
  serverEndpoint({
    server: { host: "127.0.0.1", port, serverName: "localhost", keepaliveMs: 0, transport: "auto" },
    tls: { caCert: ca, agentCert: "", agentKey: "" },
  });
const home = endpointOf(homePort);
const others = otherPorts.map(endpointOf);
let homeAlive = true;
let rotate = 0;

const log = silentLogger();
const metrics = new AgentMetrics();
const connectIds = new ConnectIdAllocator();
const lostAt: (number | null)[] = Array(count).fill(null);
const rehomedAt: (number | null)[] = Array(count).fill(null);
const homeServer: (string | null)[] = Array(count).fill(null);
let failedAttempts = 0;
let connectedHome = 0;
let rehomed = 0;

function print(value: object): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

const sets: ClientSet[] = [];
for (let i = 0; i < count; i++) {
  const set = new ClientSet({
    connect: async () => {
      const endpoint = homeAlive ? home : others[rotate++ % others.length]!;
      try {
        return await ServerConnection.open(endpoint, {
          agentId: `rehome-${i}`,
          agentIdentifiers: "",
          token: async () => token,
          probeIntervalMs: 1000,
          dialer: { dialTimeoutMs: 10_000, connectIds },
          log,
          metrics,
        });
      } catch (err) {
        if (homeServer[i] !== null) failedAttempts++;
        throw err;
      }
    },
    syncIntervalMs,
    syncIntervalCapMs,
    log,
    metrics,
  });
  set.on("change", (state) => {
    const [server] = state.connectedServers;
    if (homeServer[i] === null) {
      if (server !== undefined) {
        homeServer[i] = server;
        if (++connectedHome === count) print({ event: "ready", server });
      }
      return;
    }
    if (lostAt[i] === null && server === undefined) {
      lostAt[i] = Date.now();
      // What a load balancer's health check does, at once: the dead instance gets no more.
      homeAlive = false;
    } else if (
      lostAt[i] !== null &&
      rehomedAt[i] === null &&
      server !== undefined &&
      server !== homeServer[i]
    ) {
      rehomedAt[i] = Date.now();
      if (++rehomed === count) print({ event: "rehomed", lostAt, rehomedAt, failedAttempts });
    }
  });
  sets.push(set);
}

// Started at --start-rate a second.
const batch = Math.max(1, Math.round(startRate / 10));
let started = 0;
const starter = setInterval(() => {
  for (let k = 0; k < batch && started < count; k++) sets[started++]!.start();
  if (started >= count) clearInterval(starter);
}, 100);

// ClientSet timers are unref'd: this keeps the process up until it is told to stop.
const keepAlive = setInterval(() => {}, 60_000);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  process.once(signal, () => {
    clearInterval(keepAlive);
    clearInterval(starter);
    void Promise.all(sets.map((s) => s.stop())).finally(() => process.exit(0));
  });
}
