/**
 * Re-homing after an instance dies (issue 15, "reconnect storm"): N agents connected to instance
 * X of a local fleet of three (dynalite as DynamoDB, tenant mode, --agent-redundancy=1 so that
 * each agent holds one stream, all on X), X killed with SIGKILL, and the time until every agent
 * holds a stream to another instance: all of them, and p50/p90 per agent, from the kill.
 *
 * The agents are one load-generator process (bench/harness/rehome-agents-main.ts) running our
 * agent's own client set per agent, so they reconnect with the agent's backoff (full jitter from
 * --sync-interval, 1 s, to --sync-interval-cap, 10 s) over kgw-tunnel/1. Their connects play a
 * load balancer that takes X out at once; the two survivors each get half the storm.
 *
 * Measured with the survivors' --max-tls-handshake-rate at its default and off, in every round
 * (the order reversed every other round), each in a fresh fleet. Also recorded: the connects
 * that failed during the storm (resets over the rate among them), and the CPU the busier
 * survivor spent per second of re-homing.
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { issuePeerCertificate } from "../../lib/fleet/peer/peer-certificate-issue.js";
import { loadCa } from "../../lib/pki/ca.js";
import { writePemFiles } from "../../lib/pki/files.js";
import { createTenant, startDynalite } from "../harness/fleet-stack.js";
import { localAwsEnv } from "../harness/local-aws.js";
import { metric, scrape } from "../harness/metrics-scrape.js";
import { freePort, LOOPBACK } from "../harness/ports.js";
import { Child } from "../harness/procs.js";
import { REPO_ROOT } from "../harness/repo.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { Scope } from "../harness/scope.js";
import { httpStatus, KGW_BIN, NODE, startBackend } from "../harness/stacks.js";
import { percentile } from "../harness/stats.js";
import type { BenchContext, Cell, Row, Scenario } from "../harness/types.js";
import { waitUntil, withTimeout } from "../harness/util.js";
import { KGW_LOG_FLAGS } from "../harness/verbosity.js";
import { roundsCell } from "./common.js";

const TABLE = "kgw-bench";
const INSTANCES = 3;
const AGENTS = { quick: 50, full: 1_000 };
/** After the agents are all on X, time for the registry rows of the start to be written. */
const SETTLE_MS = { quick: 500, full: 2_000 };
/** The server's default --max-tls-handshake-rate (lib/config/server-options.ts). */
const DEFAULT_RATE = 300;
const CONFIGS = [
  { key: "bounded", rate: DEFAULT_RATE, label: `--max-tls-handshake-rate=${DEFAULT_RATE} (default)` },
  { key: "unbounded", rate: 0, label: "--max-tls-handshake-rate=0 (off)" },
] as const;
type ConfigKey = (typeof CONFIGS)[number]["key"];
const START_MS = 30_000;
const AGENTS_MAIN = path.join(REPO_ROOT, "bench", "harness", "rehome-agents-main.ts");

export const rehome: Scenario = {
  name: "rehome",
  title: "Re-homing N agents after an instance is killed (reconnect storm)",
  description:
    "A local fleet of three kgw instances (dynalite as DynamoDB, tenant mode, " +
    "--agent-redundancy=1); N agents (1,000; 50 with --quick) from one load-generator process, " +
    "each our agent's client set over kgw-tunnel/1 with its default backoff, all on instance X; X " +
    "killed with SIGKILL; the time from the kill until every agent holds a stream to a survivor, " +
    "and p50/p90 per agent. The agents' connects play a load balancer that takes X out at once. " +
    "With the survivors' --max-tls-handshake-rate at its default and off, in every round, each in " +
    "a fresh fleet; also the connects refused meanwhile and the busier survivor's CPU.",
  run,
};

interface Outcome {
  totalMs: number;
  p50Ms: number;
  p90Ms: number;
  failedAttempts: number;
  refusedByRate: number;
  /** CPU of the busier survivor per second of re-homing, ms/s. */
  survivorCpu: number;
  /** CPU of the load generator (every agent's side of the storm) per second of re-homing, ms/s. */
  agentsCpu: number;
}

interface Shared {
  env: Record<string, string>;
  peerFiles: Record<string, string>;
  tokenFile: string;
}

async function prepare(ctx: BenchContext): Promise<Shared> {
  const dynamoPort = await startDynalite(ctx);
  const env = localAwsEnv(dynamoPort);
  const peer = await issuePeerCertificate(
    loadCa({ certPem: ctx.pki.caPem, keyPem: readFileSync(ctx.pki.files.caKey, "utf8") }),
  );
  const peerFiles = await writePemFiles(mkdtempSync(path.join(ctx.pki.dir, "rehome-peer-")), {
    "peer.pem": peer.certPem,
    "peer-key.pem": peer.keyPem,
  });
  const created = await createTenant(ctx, env, await freePort());
  const dir = mkdtempSync(path.join(ctx.pki.dir, "rehome-"));
  const tokenFile = path.join(dir, "token");
  writeFileSync(tokenFile, created.agentToken, { mode: 0o600 });
  return { env, peerFiles, tokenFile };
}

interface Instance {
  server: Child;
  agentPort: number;
  adminPort: number;
}

async function startInstance(
  ctx: BenchContext,
  scope: Scope,
  shared: Shared,
  name: string,
  rate: number,
): Promise<Instance> {
  const f = ctx.pki.files;
  const [agentPort, adminPort, healthPort, peerPort] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
  ]);
  const server = new Child(
    name,
    ctx.output.fileFor(name),
    NODE,
    [
      KGW_BIN,
      "server",
      `--server-id=${name}`,
      `--registry-table=${TABLE}`,
      `--tenant-ca-cert=${f.caCert}`,
      "--tenant-max-agents=10000",
      `--agent-port=${agentPort}`,
      `--agent-bind-address=${LOOPBACK}`,
      `--cluster-cert=${f.serverCert}`,
      `--cluster-key=${f.serverKey}`,
      `--peer-port=${peerPort}`,
      `--peer-bind-address=${LOOPBACK}`,
      `--peer-advertise-address=${LOOPBACK}:${peerPort}`,
      `--peer-cert=${shared.peerFiles["peer.pem"]}`,
      `--peer-key=${shared.peerFiles["peer-key.pem"]}`,
      `--peer-ca-cert=${f.caCert}`,
      "--agent-redundancy=1",
      // Every agent comes from 127.0.0.1: the per-source bound would be the one that binds.
      "--max-tls-handshakes-per-source=0",
      `--max-tls-handshake-rate=${rate}`,
      `--admin-port=${adminPort}`,
      `--admin-bind-address=${LOOPBACK}`,
      `--health-port=${healthPort}`,
      `--health-bind-address=${LOOPBACK}`,
      "--graceful-shutdown-timeout=1s",
      ...KGW_LOG_FLAGS,
    ],
    shared.env,
  );
  scope.defer(() => server.stop(8000));
  await waitUntil(
    async () => {
      if (!server.alive) throw new Error(`${name} exited`);
      return (await httpStatus(healthPort, "/readyz")) === 200;
    },
    START_MS,
    `${name} /readyz`,
    () => server.tail(),
  );
  return { server, agentPort, adminPort };
}

/** One measurement: a fresh fleet, N agents on its first instance, that instance killed. */
async function measure(
  ctx: BenchContext,
  shared: Shared,
  tag: string,
  rate: number,
  count: number,
): Promise<Outcome> {
  const scope = new Scope();
  try {
    const instances = await Promise.all(
      Array.from({ length: INSTANCES }, (_, i) =>
        startInstance(ctx, scope, shared, `rehome-${tag}-${i + 1}`, rate),
      ),
    );
    const [x, ...survivors] = instances as [Instance, ...Instance[]];
    const agents = new Child(`rehome-${tag}-agents`, ctx.output.fileFor(`rehome-${tag}-agents`), NODE, [
      "--import",
      "tsx",
      AGENTS_MAIN,
      `--count=${count}`,
      `--home=${x.agentPort}`,
      `--others=${survivors.map((s) => s.agentPort).join(",")}`,
      `--ca=${ctx.pki.files.caCert}`,
      `--token-file=${shared.tokenFile}`,
      // Below X's own bound, so that it does not shape the start.
      `--start-rate=${Math.min(200, DEFAULT_RATE / 2)}`,
    ]);
    scope.defer(() => agents.stop(5000));
    await agents.waitForLine((l) => l.startsWith('{"event":"ready"'), 120_000);
    // The registry rows of the start are written in the background: let them settle.
    await new Promise((r) => setTimeout(r, ctx.options.quick ? SETTLE_MS.quick : SETTLE_MS.full));

    const cpuBefore = survivors.map((s) => s.server.cpuSeconds());
    const agentsCpuBefore = agents.cpuSeconds();
    const killedAt = Date.now();
    x.server.process.kill("SIGKILL");
    await withTimeout(x.server.exited, 5_000, "the killed instance exits");
    const line = await agents.waitForLine((l) => l.startsWith('{"event":"rehomed"'), 180_000);
    const cpuAfter = survivors.map((s) => s.server.cpuSeconds());
    const agentsCpu = agents.cpuSeconds() - agentsCpuBefore;
    const done = JSON.parse(line) as { rehomedAt: number[]; failedAttempts: number };
    const times = done.rehomedAt.map((t) => t - killedAt);
    const totalMs = Math.max(...times);
    const texts = await Promise.all(survivors.map((s) => scrape(s.adminPort)));
    const refusedByRate = texts.reduce(
      (sum, t) => sum + metric(t, "kgw_server_rejected_connections_total", 'reason="handshake_rate"'),
      0,
    );
    const busiest = Math.max(...cpuAfter.map((c, i) => c - cpuBefore[i]!));
    return {
      totalMs,
      p50Ms: percentile(times, 50),
      p90Ms: percentile(times, 90),
      failedAttempts: done.failedAttempts,
      refusedByRate,
      survivorCpu: (busiest * 1000) / (totalMs / 1000),
      agentsCpu: (agentsCpu * 1000) / (totalMs / 1000),
    };
  } finally {
    await scope.close();
  }
}

async function run(ctx: BenchContext): Promise<Row[]> {
  const count = ctx.options.quick ? AGENTS.quick : AGENTS.full;
  // Nothing here dials a backend; started as in every scenario, so that the run's files agree.
  await startBackend(ctx);
  const shared = await prepare(ctx);
  const results: Record<ConfigKey, Outcome[]> = { bounded: [], unbounded: [] };
  await eachRound(ctx, async (round) => {
    for (const config of roundOrder(CONFIGS, round)) {
      ctx.log(`    ${count} agents, ${config.label}`);
      const outcome = await measure(ctx, shared, `r${round + 1}-${config.key}`, config.rate, count);
      ctx.log(
        `      all elsewhere after ${Math.round(outcome.totalMs)} ms (p50 ${Math.round(outcome.p50Ms)}, ` +
          `p90 ${Math.round(outcome.p90Ms)}); ${outcome.failedAttempts} failed connects, ` +
          `${outcome.refusedByRate} reset over the rate`,
      );
      results[config.key].push(outcome);
    }
  });

  const cell = (key: ConfigKey, pick: (o: Outcome) => number): Cell => roundsCell(results[key].map(pick));
  const na = {
    direct: { na: "no agents" },
    relay: { na: "no agents" },
    upstream: { na: "upstream has no fleet" },
  };
  const rows: Row[] = [];
  for (const config of CONFIGS) {
    const k = config.key;
    const of = `${count} agents, ${config.label}`;
    rows.push(
      {
        name: `re-homing: all ${of}`,
        unit: "ms",
        better: "lower",
        noRatios: true,
        cells: { kgw: cell(k, (o) => o.totalMs), ...na },
      },
      {
        name: `re-homing: p50 per agent, ${of}`,
        unit: "ms",
        better: "lower",
        noRatios: true,
        cells: { kgw: cell(k, (o) => o.p50Ms), ...na },
      },
      {
        name: `re-homing: p90 per agent, ${of}`,
        unit: "ms",
        better: "lower",
        noRatios: true,
        cells: { kgw: cell(k, (o) => o.p90Ms), ...na },
      },
      {
        name: `re-homing: busier survivor's CPU meanwhile, ${of}`,
        unit: "ms/s",
        better: "lower",
        noRatios: true,
        cells: {
          kgw: {
            ...cell(k, (o) => o.survivorCpu),
            note: `load generator ${results[k].map((o) => Math.round(o.agentsCpu)).join("/")} ms/s, failed connects ${results[k].map((o) => o.failedAttempts).join("/")}, reset over the rate ${results[k].map((o) => o.refusedByRate).join("/")}`,
          },
          ...na,
        },
      },
    );
  }
  return rows;
}
