/**
 * Fairness between tenants (issue 14): what a tenant at its limits costs another tenant of the
 * same gateway, measured. One kgw server in tenant mode with two tenants, `quiet` and `noisy`,
 * each with our agent. Every round measures the quiet tenant twice, alone and next to the noisy
 * tenant at its limits (the order reversed every other round):
 *  - dial latency to the first byte over CONNECT (a new mTLS connection per dial, the caller
 *    certificate of the quiet tenant's bundle) and over gRPC (a new stream on an open channel):
 *    p50 and p99 of sequential dials, bounded by count and by time;
 *  - one bulk download and one upload through CONNECT, every byte checked.
 * "At its limits" (bench/harness/noisy-main.ts, a process of its own, from 127.0.0.3 and up, a
 * new address each round): the noisy
 * tenant holds its maxTunnels worth of tunnels whose readers asked for an endless download and
 * never read, and a storm of concurrent CONNECT dialers runs in a loop for the whole
 * measurement. It is stopped between measurements, and the next one waits until the server
 * counts none of the noisy tenant's tunnels open, so "alone" is alone. The storm's answers (429,
 * 200) are rows of their own, with the server's count of refusals by quota, so the table shows
 * the limits were hit.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { metric, scrape } from "../harness/metrics-scrape.js";
import type { StormResult } from "../harness/noisy-main.js";
import { connectOpener, grpcRotatingOpener, type Opener } from "../harness/paths.js";
import { Child } from "../harness/procs.js";
import { REPO_ROOT } from "../harness/repo.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { NODE, startBackend, type TunnelStack } from "../harness/stacks.js";
import { median } from "../harness/stats.js";
import { type BenchTenant, startKgwTenants } from "../harness/tenant-stack.js";
import { bulk, type Direction } from "../harness/transfer.js";
import {
  type BenchContext,
  type Cell,
  NOISY_SYSTEM,
  type Row,
  type Scenario,
  type System,
} from "../harness/types.js";
import { now, sleep, waitUntil } from "../harness/util.js";
import { Samples } from "./common.js";

const QUIET = "quiet";
const NOISY = "noisy";
/**
 * The noisy tenant's quotas. 64 tunnels: as many as the storm has dialers, and as many stalled
 * readers as one process opens in well under a second; every storm dial then finds the tunnel
 * quota full (it is checked before the dial rate, lib/server/policy/tenant-quotas.ts, so those
 * refusals take no token). 50 dials/s with a burst of 100: a burst holds the 64 stalled readers
 * each round opens at once, and the rate is far below what the storm attempts, so any slot a
 * stalled reader gave up would not let the storm through either. The quiet tenant has the
 * server's quotas (stacks.ts: far above anything the benchmark asks).
 */
const NOISY_QUOTA = { maxTunnels: 64, dialRate: 50, dialBurst: 100 };
/** Concurrent CONNECT dialers of the storm: the server's default per-source handshake limit. */
const STORM_DIALERS = 64;
/** The storm client's niceness (see startNoisyLoad). */
const STORM_NICE = 19;
/**
 * The noisy tenant's kube-apiserver is another host than the quiet one's; a new address every
 * round, so that each round's storm starts from a source the server does not throttle yet (the
 * last one's stays throttled for 10 s after its last refusal, lib/transport/refusal-throttle.ts).
 */
const noisySource = (round: number): string => `127.0.0.${2 + round}`;
const NOISY_MAIN = path.join(REPO_ROOT, "bench", "harness", "noisy-main.ts");
const NOISY_START_MS = 60_000;
/**
 * How long the storm runs, once the stalled readers have stalled, before the quiet tenant is
 * measured next to it: the server's CPU over this spell is what the storm alone costs it.
 */
const RAMP_MS = { quick: 100, full: 2_000 };
/**
 * The stalled readers' endless downloads first fill every buffer on their way (the caller's
 * socket, the server's, the agent's window): 64 transfers of several MB each, seconds of both
 * cores on a 2-core machine. That is a burst of downloads, not a tenant at its limits; the quiet
 * tenant is measured once the noisy tenant's tunnels carry less than SETTLED_BYTES per
 * SETTLE_POLL_MS (at most SETTLE_MAX_MS), and how long that took is a note of the storm's row.
 */
const SETTLE_POLL_MS = 250;
const SETTLED_BYTES = 256 * 1024;
const SETTLE_MAX_MS = 30_000;
/** The server closes the noisy tenant's tunnels once its process is gone; this long at most. */
const GONE_MS = 15_000;
const WARMUP_BYTES = 32 * 1024 * 1024;
const DIRECTIONS: Direction[] = ["download", "upload"];

type State = "alone" | "noisy";
const STATES: State[] = ["alone", "noisy"];
const STATE_SYSTEM: Record<State, System> = { alone: "kgw", noisy: NOISY_SYSTEM };

export const fairness: Scenario = {
  name: "fairness",
  title: "Fairness: a quiet tenant alone and next to a noisy tenant at its limits (tenant mode)",
  description:
    "kgw in tenant mode (always; no --tenant-mode needed) with two tenants, each with our agent. " +
    "Each round measures the quiet tenant alone and next to the noisy one, interleaved: CONNECT " +
    "and gRPC dials to the first byte (p50/p99, sequential, at most the dial count or the time " +
    "bound), one CONNECT download and one upload (every byte checked). The noisy tenant, with " +
    `quotas maxTunnels ${NOISY_QUOTA.maxTunnels}, ${NOISY_QUOTA.dialRate} dials/s, burst ` +
    `${NOISY_QUOTA.dialBurst}, holds ${NOISY_QUOTA.maxTunnels} tunnels with stalled readers and ` +
    `runs ${STORM_DIALERS} CONNECT dialers in a loop from another source address, in a process ` +
    "of its own, for the whole measurement, and is stopped before the next; its 429s and 200s " +
    "per second are rows. noisy/alone is taken within each round.",
  run,
};

/** Dials to the first byte, one after the other, until `maxCount` or `maxMs`, but at least `minCount`. */
async function timedDialLatencies(
  open: Opener,
  minCount: number,
  maxCount: number,
  maxMs: number,
): Promise<number[]> {
  const out: number[] = [];
  const t0 = now();
  while (out.length < maxCount && (out.length < minCount || now() - t0 < maxMs)) {
    const conn = await open();
    out.push(conn.dialMs);
    conn.close();
  }
  return out;
}

/** The server's view of the noisy tenant: tunnels open, and dials refused by quota so far. */
async function serverCounts(stack: TunnelStack) {
  const text = await scrape(stack.adminPort);
  return {
    tunnels: metric(text, "kgw_tenant_tunnels_open", `tenant="${NOISY}"`),
    bytes: metric(text, "kgw_tenant_bytes_total", `tenant="${NOISY}"`),
    maxTunnels: metric(text, "kgw_server_quota_refusals_total", 'quota="maxTunnels"'),
    dialRate: metric(text, "kgw_server_quota_refusals_total", 'quota="dialsPerSecond"'),
    resetBeforeTls: metric(text, "kgw_server_rejected_connections_total", 'reason="source_throttled"'),
  };
}

/** Waits until the noisy tenant's tunnels have stopped moving bytes: what they carried, and how long. */
async function settle(stack: TunnelStack): Promise<{ bytes: number; ms: number }> {
  const t0 = now();
  const first = (await serverCounts(stack)).bytes;
  let last = first;
  while (now() - t0 < SETTLE_MAX_MS) {
    await sleep(SETTLE_POLL_MS);
    const bytes = (await serverCounts(stack)).bytes;
    const moved = bytes - last;
    last = bytes;
    if (moved < SETTLED_BYTES) break;
  }
  return { bytes: last - first, ms: now() - t0 };
}

interface NoisyLoad {
  /** How long the stalled readers' buffers took to fill after the load was ready, and with how much. */
  fill: { bytes: number; ms: number };
  /** The server's CPU while only the storm ran (after the fill): cores, and ms per storm connection. */
  server: { cores: number; msPerConnection: number };
  /** Stops the load (the process exits, closing every connection) and returns its counts. */
  stop(): Promise<StormResult & { stormCores: number }>;
}

/** The noisy tenant's stalled readers and dial storm, running once this resolves. */
async function startNoisyLoad(
  ctx: BenchContext,
  stack: TunnelStack,
  tenant: BenchTenant,
  target: string,
  source: string,
): Promise<NoisyLoad> {
  const logFile = ctx.output.fileFor("noisy-tenant");
  const resultFile = logFile.replace(/\.log$/, ".json");
  const f = tenant.callerFiles;
  // At the lowest priority: on a two-core machine the storm's own client would otherwise take a
  // core the gateway needs, which an attacker on another host would not (docs/PERFORMANCE.md).
  const child = new Child("noisy-tenant", logFile, "nice", [
    `-n${STORM_NICE}`,
    NODE,
    "--import",
    "tsx",
    NOISY_MAIN,
    `--port=${stack.frontendPort}`,
    `--target=${target}`,
    `--ca=${f.caBundle}`,
    `--cert=${f.clientCert}`,
    `--key=${f.clientKey}`,
    `--source=${source}`,
    `--stalled=${NOISY_QUOTA.maxTunnels}`,
    `--dialers=${STORM_DIALERS}`,
    `--result=${resultFile}`,
  ]);
  ctx.scope.defer(() => child.kill());
  try {
    await child.waitForLine((l) => l.startsWith('{"ready"'), NOISY_START_MS);
  } catch (err) {
    await child.kill();
    throw err;
  }
  const cpu0 = child.cpuSeconds();
  const t0 = now();
  const fill = await settle(stack);
  const c0 = await serverCounts(stack);
  const [s0, w0] = [stack.server.cpuSeconds(), now()];
  await sleep(ctx.options.quick ? RAMP_MS.quick : RAMP_MS.full);
  const [s1, w1] = [stack.server.cpuSeconds(), now()];
  const c1 = await serverCounts(stack);
  // Every storm connection is answered 429 (a quota refusal) or reset before TLS (throttled).
  const connections =
    c1.maxTunnels + c1.dialRate + c1.resetBeforeTls - (c0.maxTunnels + c0.dialRate + c0.resetBeforeTls);
  const server = {
    cores: (s1 - s0) / ((w1 - w0) / 1000),
    msPerConnection: connections > 0 ? ((s1 - s0) * 1000) / connections : Number.NaN,
  };
  return {
    fill,
    server,
    async stop() {
      const stormCores = (child.cpuSeconds() - cpu0) / ((now() - t0) / 1000);
      await child.stop();
      const { code, signal } = await child.exited;
      if (code !== 0)
        throw new Error(`noisy tenant exited (code ${code}, signal ${signal})\n${child.tail()}`);
      return { ...(JSON.parse(readFileSync(resultFile, "utf8")) as StormResult), stormCores };
    },
  };
}

async function run(ctx: BenchContext): Promise<Row[]> {
  const { sizes } = ctx;
  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const { stack, tenants } = await startKgwTenants(ctx, [
    { id: QUIET },
    {
      id: NOISY,
      quota: [
        `--max-tunnels=${NOISY_QUOTA.maxTunnels}`,
        `--dial-rate=${NOISY_QUOTA.dialRate}`,
        `--dial-burst=${NOISY_QUOTA.dialBurst}`,
      ],
    },
  ]);
  const quiet = tenants[QUIET]!;
  const noisy = tenants[NOISY]!;
  const grpc = grpcRotatingOpener(quiet.callers, stack.frontendPort, target);
  ctx.scope.defer(() => grpc.close());
  const openers: Record<"connect" | "grpc", Opener> = {
    connect: connectOpener(quiet.callers, stack.frontendPort, target),
    grpc: grpc.open,
  };

  // Warm-up (JIT, the gRPC channel, buffers), alone.
  const warm = new Samples(ctx);
  for (const [name, open] of Object.entries(openers)) {
    await warm.take(`${name}-dials`, async () => {
      await timedDialLatencies(open, sizes.warmupDials, sizes.warmupDials, Number.POSITIVE_INFINITY);
      return Number.NaN;
    });
  }
  for (const dir of DIRECTIONS) {
    await warm.take(dir, async () => {
      await bulk(openers.connect, dir, Math.min(WARMUP_BYTES, sizes.bulkBytes), sizes.warmupMs);
      return Number.NaN;
    });
  }

  const lat = new Samples(ctx);
  const dialCounts = new Samples(ctx);
  const mbps = new Samples(ctx);
  const storm = new Samples(ctx);
  const stormNotes: {
    result: StormResult & { stormCores: number };
    held: number;
    fill: { bytes: number; ms: number };
    server: { cores: number; msPerConnection: number };
    byQuota: { maxTunnels: number; dialRate: number };
  }[] = [];
  const measures = ["connect", "grpc", ...DIRECTIONS] as const;
  // A p99 needs some dials even when each takes long (a CONNECT dial next to the storm).
  const minDials = Math.ceil(sizes.latencyDials * 0.03);

  const measureQuiet = async (state: State, round: number) => {
    for (const what of roundOrder(measures, round)) {
      const key = `${state}-${what}`;
      ctx.log(`    quiet tenant ${state === "alone" ? "alone" : "next to the noisy tenant"}: ${what}`);
      if (what === "connect" || what === "grpc") {
        let n = 0;
        await lat.takeRound(key, async () => {
          const ms = await timedDialLatencies(
            openers[what],
            minDials,
            sizes.latencyDials,
            sizes.fairnessDialMs,
          );
          n = ms.length;
          return ms;
        });
        if (n > 0) await dialCounts.take(key, async () => n);
      } else {
        await mbps.take(
          key,
          async () => (await bulk(openers.connect, what, sizes.bulkBytes, sizes.bulkMaxMs)).mbps,
        );
      }
    }
  };
  const failNoisy = (err: unknown) => {
    for (const what of measures) if (!lat.failed(`noisy-${what}`)) lat.fail(`noisy-${what}`, err);
    for (const what of measures) if (!mbps.failed(`noisy-${what}`)) mbps.fail(`noisy-${what}`, err);
    for (const k of ["refused", "reset", "ok"]) if (!storm.failed(k)) storm.fail(k, err);
  };

  await eachRound(ctx, async (round) => {
    for (const state of roundOrder(STATES, round)) {
      if (state === "alone") {
        await measureQuiet(state, round);
        continue;
      }
      ctx.log("    noisy tenant: stalled readers, then the dial storm");
      const before = await serverCounts(stack);
      let load: NoisyLoad;
      try {
        load = await startNoisyLoad(ctx, stack, noisy, target, noisySource(round));
      } catch (err) {
        failNoisy(err);
        continue;
      }
      ctx.log(
        `    noisy tenant: stalled readers filled with ${(load.fill.bytes / 1e6).toFixed(0)} MB in ${load.fill.ms.toFixed(0)} ms; ` +
          `then the storm alone took ${load.server.cores.toFixed(3)} server cores, ${load.server.msPerConnection.toFixed(3)} ms per connection`,
      );
      let held = 0;
      try {
        await measureQuiet(state, round);
        held = (await serverCounts(stack)).tunnels;
      } finally {
        const result = await load.stop();
        await waitUntil(
          async () => (await serverCounts(stack)).tunnels === 0,
          GONE_MS,
          "the server closing the noisy tenant's tunnels",
          () => stack.server.tail(),
        );
        const after = await serverCounts(stack);
        const seconds = result.stormMs / 1000;
        stormNotes.push({
          result,
          held,
          fill: load.fill,
          server: load.server,
          byQuota: {
            maxTunnels: after.maxTunnels - before.maxTunnels,
            dialRate: after.dialRate - before.dialRate,
          },
        });
        await storm.take("reset", async () => (after.resetBeforeTls - before.resetBeforeTls) / seconds);
        await storm.take("refused", async () => {
          if (result.refused + result.ok === 0)
            throw new Error(
              `the storm got no answer (${result.noAnswer} dials, first: ${result.firstNoAnswer})`,
            );
          return result.refused / seconds;
        });
        await storm.take("ok", async () => result.ok / seconds);
      }
    }
  });

  const countNote = (key: string): string | undefined => {
    const c = dialCounts.cell(key);
    if (!c.rounds?.length) return undefined;
    const [lo, hi] = [Math.min(...c.rounds), Math.max(...c.rounds)];
    return lo === hi ? `${lo} dials` : `${lo}–${hi} dials`;
  };
  const sum = (f: (n: (typeof stormNotes)[number]) => number) => stormNotes.reduce((a, n) => a + f(n), 0);
  const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
  const held = stormNotes.map((n) => n.held);
  const heldText =
    Math.min(...held) === Math.max(...held) ? `${held[0]}` : `${Math.min(...held)}–${Math.max(...held)}`;
  // Totals over all rounds; the server's counts are its quota refusals (only the noisy tenant's).
  const refusedNote =
    `${fmt(sum((n) => n.result.refused))} in all; server: ${fmt(sum((n) => n.byQuota.maxTunnels))} at ` +
    `maxTunnels, ${fmt(sum((n) => n.byQuota.dialRate))} at dialsPerSecond; ` +
    `${fmt(sum((n) => n.result.noAnswer))} unanswered; storm client ` +
    `${median(stormNotes.map((n) => n.result.stormCores)).toFixed(2)} cores; server, storm alone: ` +
    `${median(stormNotes.map((n) => n.server.cores)).toFixed(3)} cores, ` +
    `${median(stormNotes.map((n) => n.server.msPerConnection)).toFixed(3)} ms CPU per storm connection`;
  const okNote =
    `${fmt(sum((n) => n.result.ok))} in all, ${fmt(sum((n) => n.result.otherStatus))} other answers; ` +
    `stalled tunnels open (server): ${heldText} of ${NOISY_QUOTA.maxTunnels}, ` +
    `${fmt(sum((n) => n.result.stalledLost))} closed early; before measuring, their buffers filled ` +
    `with ${fmt(median(stormNotes.map((n) => n.fill.bytes / 1e6)))} MB in ` +
    `${fmt(median(stormNotes.map((n) => n.fill.ms)))} ms (median)`;

  const noTenants: Partial<Record<System, Cell>> = {
    direct: { na: "no tenants" },
    relay: { na: "no tenants" },
    upstream: { na: "upstream has no tenants" },
  };
  const quietCells = (f: (state: State) => Cell): Partial<Record<System, Cell>> => ({
    ...Object.fromEntries(STATES.map((s) => [STATE_SYSTEM[s], f(s)])),
    ...noTenants,
  });
  const rows: Row[] = [];
  for (const [what, label] of [
    ["connect", "CONNECT dial to first byte (new mTLS connection)"],
    ["grpc", "gRPC dial to first byte (new stream on an open channel)"],
  ] as const) {
    for (const p of [50, 99]) {
      rows.push({
        name: `quiet tenant: ${label}, p${p}`,
        unit: "ms",
        better: "lower",
        cells: quietCells((s) => ({
          ...lat.percentileCell(`${s}-${what}`, p),
          note: countNote(`${s}-${what}`),
        })),
      });
    }
  }
  for (const dir of DIRECTIONS) {
    rows.push({
      name: `quiet tenant: ${dir}, HTTP CONNECT`,
      unit: "MB/s",
      better: "higher",
      cells: quietCells((s) => mbps.cell(`${s}-${dir}`)),
    });
  }
  const stormCells = (cell: Cell): Partial<Record<System, Cell>> => ({
    kgw: { na: "the noisy tenant is stopped while the quiet tenant is measured alone" },
    [NOISY_SYSTEM]: cell,
    ...noTenants,
  });
  rows.push(
    {
      name: `noisy tenant: storm dials answered 429 (refused), per second, ${STORM_DIALERS} dialers`,
      unit: "dials/s",
      better: "higher",
      noRatios: true,
      cells: stormCells(storm.cell("refused", refusedNote)),
    },
    {
      name: "noisy tenant: storm connections reset before TLS (its source throttled), per second",
      unit: "conns/s",
      better: "higher",
      noRatios: true,
      cells: stormCells(storm.cell("reset")),
    },
    {
      name: "noisy tenant: storm dials answered 200, per second",
      unit: "dials/s",
      better: "lower",
      noRatios: true,
      cells: stormCells(storm.cell("ok", okNote)),
    },
  );
  return rows;
}
