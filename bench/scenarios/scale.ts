/**
 * Scale per instance (issue 15): what one server pays for each idle upstream-style agent, side
 * by side with upstream's proxy-server holding the same agents.
 *
 * The benchmark process is the one load generator: it plays every agent as upstream's
 * proxy-agent connects, AgentService.Connect over HTTP/2 on a TLS connection of its own
 * (raw.ts, as `memory` does), towards our server's agent port and towards upstream's. Per
 * system, in every round, in fresh processes:
 *  1. time to listen: the server is started LISTEN_SAMPLES times and stopped again; each time,
 *     from the spawn until its agent port accepts a TCP connection (harness/listen.ts);
 *     the figure of the round is the median of those (the first start reads files from disk
 *     cache too: a restart, as after a crash or a roll);
 *  2. one more start; a warm-up batch of agents opened and closed; settle; RSS and CPU read;
 *  3. agents opened up to each count in turn (32 handshakes at a time); the server's CPU time
 *     over the opening, divided by the agents opened: CPU per registration (TLS handshake
 *     included, on both sides alike); settle; RSS growth over the base divided by the count:
 *     RSS per idle agent; then the server's CPU over IDLE_WINDOW_MS with every agent idle:
 *     CPU per second while idle, at both counts: once right after the settle and once more
 *     STEADY_AFTER_MS later (the registrations' aftermath, then the cost of holding the agents),
 *     and how much the steady figure grows per 1,000 agents.
 *  4. steps 2–3 once more with the agents spread over MANY_SOURCES source addresses
 *     (127.0.0.2 …) instead of one: RSS and registration CPU again (a fleet of nodes, each with
 *     its own address, against a cluster behind one NAT address; the server keeps per-source
 *     state, the handshake gate's turns and the refusal throttle); idle CPU is not read again.
 * Every agent stream must still be open after its idle window (a server that closed idle agents
 * would look cheap): a stream that ended fails the measurement.
 */

import { timeToListen } from "../harness/listen.js";
import { AGENT_TOKEN } from "../harness/pki.js";
import type { Child } from "../harness/procs.js";
import { type AgentStreams, openAgentStreams } from "../harness/raw.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { Scope } from "../harness/scope.js";
import { startKgwServer, startUpstream, type TunnelStack } from "../harness/stacks.js";
import { median } from "../harness/stats.js";
import type { BenchContext, Cell, Row, Scenario } from "../harness/types.js";
import { errorMessage, now, sleep } from "../harness/util.js";
import { roundsCell, upstreamNa } from "./common.js";

/** Idle agents at each reading; the second is the fleet instance. */
const COUNTS = [1_000, 10_000];
const QUICK_COUNTS = [10, 40];
/** CPU is read from /proc in 10 ms ticks: 20 s resolves 0.5 ms/s. */
const IDLE_WINDOW_MS = 20_000;
const QUICK_IDLE_WINDOW_MS = 500;
/**
 * Between the first idle window and the second. In the first, V8 is still collecting after the
 * registrations (memory-reducer mark-compacts about 10-25 s after a burst of 3,000: tens of ms/s
 * that an instance pays once per burst, not per second held); the second, 40-60 s after the
 * last registration, reads what holding the agents costs.
 */
const STEADY_AFTER_MS = 20_000;
const QUICK_STEADY_AFTER_MS = 200;
const LISTEN_SAMPLES = 3;
const QUICK_LISTEN_SAMPLES = 1;
const CONCURRENCY = 32;
/** Source addresses of the many-sources pass: a few agents each at 1,000, 40 each at 10,000. */
const MANY_SOURCES = 250;
const WARMUP = 100;
/** Descriptors kept free for everything else a process has open. */
const FD_RESERVE = 300;

export const scale: Scenario = {
  name: "scale",
  title: "Scale per instance: idle upstream-style (gRPC) agents held by one server",
  description:
    "One load generator (the benchmark) opens N idle AgentService.Connect streams over HTTP/2, " +
    "each on its own TLS connection, towards kgw's server and upstream's proxy-server, fresh " +
    "processes per system in every round. Figures: time from spawning the server to its agent " +
    "port accepting connections (median of several restarts); the server's CPU time per agent " +
    "registered (TLS handshake included); its RSS growth per idle agent; its CPU per second " +
    "while every agent is idle, at two counts, right after registering and again 40 s later (steady), " +
    "and the growth of the steady figure per 1,000 agents.",
  run,
};

/** One system's figures in one round. */
interface Sample {
  listenMs: number;
  /** Per count, from one source address: ms of server CPU per registration, KiB of RSS per agent, idle ms/s. */
  perCount: { count: number; regMs: number; rssKiB: number; idleMsPerS: number; steadyMsPerS: number }[];
  /** Per count, from MANY_SOURCES addresses: the same without idle CPU. */
  manySources: { count: number; regMs: number; rssKiB: number }[];
}

type System = "kgw" | "upstream";

/** Starts the system's server (no agent) in `scope`; resolves with it and its time to listen. */
async function startTimed(
  ctx: BenchContext,
  scope: Scope,
  system: System,
): Promise<{ stack: TunnelStack; listenMs: number }> {
  let listening: Promise<number> | undefined;
  const sub = {
    ...ctx,
    scope,
    onServerSpawn: (server: Child, agentPort: number) => {
      listening = timeToListen(server, agentPort, now());
    },
  };
  const stack =
    system === "kgw" ? await startKgwServer(sub) : await startUpstream(sub, "grpc", { agent: false });
  if (!listening) throw new Error("the server's spawn was not reported");
  return { stack, listenMs: await listening };
}

async function measure(ctx: BenchContext, system: System, counts: number[]): Promise<Sample> {
  const quick = ctx.options.quick;
  const listenMs: number[] = [];
  for (let i = 0; i < (quick ? QUICK_LISTEN_SAMPLES : LISTEN_SAMPLES); i++) {
    const scope = new Scope();
    try {
      listenMs.push((await startTimed(ctx, scope, system)).listenMs);
    } finally {
      await scope.close();
    }
  }
  const one = await hold(ctx, system, counts, 1, listenMs);
  const many = await hold(ctx, system, counts, MANY_SOURCES, listenMs);
  return {
    listenMs: median(listenMs),
    perCount: one,
    manySources: many.map(({ count, regMs, rssKiB }) => ({ count, regMs, rssKiB })),
  };
}

/**
 * One fresh server holding agents from `sources` addresses up to each count in turn (steps 2–3);
 * its time to listen joins `listenMs`. Idle CPU is read from one source only.
 */
async function hold(
  ctx: BenchContext,
  system: System,
  counts: number[],
  sources: number,
  listenMs: number[],
): Promise<Sample["perCount"]> {
  const quick = ctx.options.quick;
  const scope = new Scope();
  const opened: AgentStreams[] = [];
  try {
    const { stack, listenMs: last } = await startTimed(ctx, scope, system);
    listenMs.push(last);
    const server = stack.server;
    let seq = 0;
    const open = async (n: number) => {
      const streams = await openAgentStreams(ctx.pki, stack.agentPort, {
        count: n,
        concurrency: CONCURRENCY,
        idPrefix: `${system}-${sources}-${seq++}`,
        token: AGENT_TOKEN,
        transport: "grpc",
        sources,
      });
      opened.push(streams);
      return streams;
    };
    const warm = await open(Math.min(WARMUP, counts[0]!));
    warm.close();
    opened.length = 0;
    await sleep(ctx.sizes.settleMs);
    const baseRss = server.rssKiB();
    const perCount: Sample["perCount"] = [];
    let held = 0;
    for (const count of counts) {
      ctx.log(`  ${system}: ${count.toLocaleString("en-US")} idle agents from ${sources} source address(es)`);
      const cpu0 = server.cpuSeconds();
      await open(count - held);
      const regMs = ((server.cpuSeconds() - cpu0) * 1000) / (count - held);
      held = count;
      await sleep(ctx.sizes.settleMs);
      const rssKiB = (server.rssKiB() - baseRss) / count;
      let idleMsPerS = Number.NaN;
      let steadyMsPerS = Number.NaN;
      if (sources === 1) {
        const windowMs = quick ? QUICK_IDLE_WINDOW_MS : IDLE_WINDOW_MS;
        const idleCpu = async () => {
          const cpu1 = server.cpuSeconds();
          const t1 = now();
          await sleep(windowMs);
          return ((server.cpuSeconds() - cpu1) * 1000) / ((now() - t1) / 1000);
        };
        idleMsPerS = await idleCpu();
        await sleep(quick ? QUICK_STEADY_AFTER_MS : STEADY_AFTER_MS);
        steadyMsPerS = await idleCpu();
      }
      const ended = opened.reduce((a, o) => a + o.ended(), 0);
      if (ended > 0) throw new Error(`${system}: ${ended} of ${count} idle agent streams ended`);
      perCount.push({ count, regMs, rssKiB, idleMsPerS, steadyMsPerS });
    }
    return perCount;
  } finally {
    for (const o of opened) o.close();
    await scope.close();
  }
}

async function run(ctx: BenchContext): Promise<Row[]> {
  const max = ctx.fdLimit - FD_RESERVE;
  const counts = [...new Set((ctx.options.quick ? QUICK_COUNTS : COUNTS).map((c) => Math.min(c, max)))];
  const systems: System[] = ctx.upstream ? ["kgw", "upstream"] : ["kgw"];
  const samples = new Map<System, Sample[] | Error>();
  await eachRound(ctx, async (round) => {
    for (const system of roundOrder(systems, round)) {
      const sofar = samples.get(system) ?? [];
      if (sofar instanceof Error) continue;
      try {
        samples.set(system, [...sofar, await measure(ctx, system, counts)]);
      } catch (err) {
        ctx.log(`  ${system}: ${errorMessage(err).split("\n")[0]}`);
        samples.set(system, err instanceof Error ? err : new Error(String(err)));
      }
    }
  });

  const cell = (system: System, pick: (s: Sample) => number): Cell => {
    if (system === "upstream" && !ctx.upstream) return upstreamNa(ctx);
    const s = samples.get(system);
    if (s === undefined) return { na: "not measured" };
    if (s instanceof Error) return { error: s.message };
    return roundsCell(s.map(pick));
  };
  const row = (
    name: string,
    unit: Row["unit"],
    pick: (s: Sample) => number,
    targets: Row["targets"] = [{ kind: "upstream" }],
  ): Row => ({
    name,
    unit,
    better: "lower",
    targets,
    cells: {
      kgw: cell("kgw", pick),
      direct: { na: "no server" },
      relay: { na: "no server" },
      upstream: cell("upstream", pick),
    },
  });
  const n = (c: number) => c.toLocaleString("en-US");
  const at = (s: Sample, i: number) => s.perCount[i]!;
  const many = (s: Sample, i: number) => s.manySources[i]!;
  const rows: Row[] = [row("time from process start to listening", "ms", (s) => s.listenMs)];
  counts.forEach((c, i) => {
    rows.push(row(`server RSS per idle agent, ${n(c)} agents, one source`, "KiB", (s) => at(s, i).rssKiB));
    rows.push(
      row(
        `server RSS per idle agent, ${n(c)} agents, ${MANY_SOURCES} sources`,
        "KiB",
        (s) => many(s, i).rssKiB,
      ),
    );
  });
  counts.forEach((c, i) => {
    const what = i === 0 ? `first ${n(c)}` : `${n(counts[i - 1]!)} → ${n(c)}`;
    rows.push(row(`server CPU per agent registration, ${what}, one source`, "ms", (s) => at(s, i).regMs));
    rows.push(
      row(
        `server CPU per agent registration, ${what}, ${MANY_SOURCES} sources`,
        "ms",
        (s) => many(s, i).regMs,
      ),
    );
  });
  // Where each idle window lies, in s after the last registration.
  const windowMs = ctx.options.quick ? QUICK_IDLE_WINDOW_MS : IDLE_WINDOW_MS;
  const steadyAfterMs = ctx.options.quick ? QUICK_STEADY_AFTER_MS : STEADY_AFTER_MS;
  const firstWindow = `${ctx.sizes.settleMs / 1000}-${(ctx.sizes.settleMs + windowMs) / 1000} s`;
  const steadyFromS = (ctx.sizes.settleMs + windowMs + steadyAfterMs) / 1000;
  const steadyToS = steadyFromS + windowMs / 1000;
  counts.forEach((c, i) => {
    rows.push(
      row(
        `server CPU while idle, ${n(c)} agents, ${firstWindow} after registering`,
        "ms/s",
        (s) => at(s, i).idleMsPerS,
      ),
    );
    rows.push(
      row(
        `server CPU while idle, ${n(c)} agents, steady (${steadyFromS}-${steadyToS} s after)`,
        "ms/s",
        (s) => at(s, i).steadyMsPerS,
      ),
    );
  });
  if (counts.length >= 2) {
    const first = counts[0]!;
    const last = counts[counts.length - 1]!;
    rows.push(
      row(
        `growth of steady idle CPU per 1,000 agents (${n(first)} → ${n(last)})`,
        "ms/s",
        // From the steady windows: what the first one adds is the registrations' aftermath.
        (s) => ((at(s, counts.length - 1).steadyMsPerS - at(s, 0).steadyMsPerS) * 1000) / (last - first),
        // The goal is no growth; 0.1 ms/s per 1,000 agents is what 20 s windows in 10 ms
        // ticks resolve at 1,000 → 10,000 (0.5 ms/s per reading, over 9,000 agents: ≈0.06).
        [{ kind: "atMost", value: 0.1 }, { kind: "upstream" }],
      ),
    );
  }
  return rows;
}
