/**
 * Memory per idle agent stream and per idle tunneled connection: growth of the resident set
 * (VmRSS) of the process that holds them, divided by their number.
 *
 * Idle agent streams: the benchmark plays N agents, each on its own TLS connection (real agents
 * each have one), against a server with no real agent: kgw-tunnel/1 towards our server, as our
 * agent connects, and AgentService.Connect over HTTP/2 towards upstream.
 * Idle tunneled connections: N CONNECT tunnels (one mTLS connection each) through one agent to
 * the backend, each used once (a PING) and then left idle; the figure is given for the server
 * and for the agent. The relay chain's processes give the floor of a Node process holding a
 * connection pair.
 *
 * Procedure per system, in every round: a fresh process; open and close a warm-up batch; settle;
 * read RSS; open connections up to each count in turn; settle; read RSS. The figure is the median
 * over rounds. Counts are capped by the open-files limit (the busiest process needs one
 * descriptor per connection, a relay two).
 */

import { type Conn, connectOpener, type Opener, tcpOpener } from "../harness/paths.js";
import { AGENT_TOKEN } from "../harness/pki.js";
import type { Child } from "../harness/procs.js";
import { type AgentStreams, openAgentStreams } from "../harness/raw.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { Scope } from "../harness/scope.js";
import {
  startBackend,
  startKgw,
  startRelayChain,
  startUpstream,
  type TunnelStack,
} from "../harness/stacks.js";
import type { BenchContext, Cell, Row, Scenario } from "../harness/types.js";
import { errorMessage, inBatches, sleep, withTimeout } from "../harness/util.js";
import { roundsCell, upstreamNa } from "./common.js";

const CONCURRENCY = 32;
const WARMUP = 100;
/** Descriptors kept free for everything else a process has open. */
const FD_RESERVE = 300;

export const memory: Scenario = {
  name: "memory",
  title: "Memory per idle agent stream and per idle tunneled connection (RSS growth / count)",
  description:
    "RSS (VmRSS) growth of the server divided by the number of idle agent streams it holds (each " +
    "on its own TLS connection, played by the benchmark: kgw-tunnel/1 for kgw as our agent " +
    "connects, gRPC over HTTP/2 for upstream), and of the server and the agent " +
    "divided by the number of idle CONNECT tunnels (each used once, then idle); at each count, in " +
    "fresh processes, after a warm-up batch. The relay processes give the floor for a Node " +
    "process holding a connection pair.",
  run,
};

/** KiB per item at each count, per process watched. */
type Growth = Map<number, { count: number; perItem: number[] }>;

interface Holder {
  /** Opens `n` more idle items. */
  open(n: number): Promise<void>;
  closeAll(): void;
}

async function measureGrowth(
  ctx: BenchContext,
  label: string,
  procs: Child[],
  counts: number[],
  holder: Holder,
): Promise<Growth> {
  const warm = Math.min(WARMUP, counts[0] ?? WARMUP);
  await holder.open(warm);
  holder.closeAll();
  await sleep(ctx.sizes.settleMs);
  const base = procs.map((p) => p.rssKiB());
  const out: Growth = new Map();
  let held = 0;
  try {
    for (const count of counts) {
      ctx.log(`  ${label}: ${count}`);
      await holder.open(count - held);
      held = count;
      await sleep(ctx.sizes.settleMs);
      const now = procs.map((p) => p.rssKiB());
      out.set(count, { count, perItem: now.map((v, i) => (v - base[i]!) / count) });
    }
  } finally {
    holder.closeAll();
  }
  return out;
}

function tunnelHolder(open: Opener): Holder {
  let conns: Conn[] = [];
  return {
    async open(n) {
      await inBatches(n, CONCURRENCY, async () => {
        conns.push(await withTimeout(open(), 30_000, "dial"));
      });
    },
    closeAll() {
      for (const c of conns) c.close();
      conns = [];
    },
  };
}

function agentHolder(
  ctx: BenchContext,
  stack: TunnelStack,
  prefix: string,
  transport: "grpc" | "tunnel",
): Holder {
  let opened: AgentStreams[] = [];
  let seq = 0;
  return {
    async open(n) {
      opened.push(
        await openAgentStreams(ctx.pki, stack.agentPort, {
          count: n,
          concurrency: CONCURRENCY,
          idPrefix: `${prefix}-${seq++}`,
          token: AGENT_TOKEN,
          transport,
        }),
      );
    },
    closeAll() {
      for (const o of opened) o.close();
      opened = [];
    },
  };
}

/** Counts capped so the process holding `fdsPerItem` descriptors per item stays under the limit. */
function capped(ctx: BenchContext, fdsPerItem: number): number[] {
  const max = Math.floor((ctx.fdLimit - FD_RESERVE) / fdsPerItem);
  return [...new Set(ctx.sizes.memoryCounts.map((c) => Math.min(c, max)))];
}

async function attempt(ctx: BenchContext, what: string, f: () => Promise<Growth>): Promise<Growth | Error> {
  try {
    return await f();
  } catch (err) {
    ctx.log(`  ${what}: ${errorMessage(err).split("\n")[0]}`);
    return err instanceof Error ? err : new Error(String(err));
  }
}

/** Runs `f` with its own processes, stopped before the next measurement starts. */
async function isolated<T>(ctx: BenchContext, f: (sub: BenchContext) => Promise<T>): Promise<T> {
  const scope = new Scope();
  try {
    return await f({ ...ctx, scope });
  } finally {
    await scope.close();
  }
}

/** What a measurement holds idle, and in which system. */
type Measurement = "agents-kgw" | "agents-upstream" | "tunnels-kgw" | "tunnels-relay" | "tunnels-upstream";

async function run(ctx: BenchContext): Promise<Row[]> {
  const requested = ctx.sizes.memoryCounts;
  const oneFd = capped(ctx, 1);
  const twoFds = capped(ctx, 2);

  const measure: Record<Measurement, () => Promise<Growth>> = {
    "agents-kgw": () =>
      isolated(ctx, async (sub) => {
        const stack = await startKgw(sub, { agent: false });
        return measureGrowth(
          sub,
          "kgw idle agent streams",
          [stack.server],
          oneFd,
          agentHolder(sub, stack, "kgw", "tunnel"),
        );
      }),
    "agents-upstream": () =>
      isolated(ctx, async (sub) => {
        const stack = await startUpstream(sub, "grpc", { agent: false });
        return measureGrowth(
          sub,
          "upstream idle agent streams",
          [stack.server],
          oneFd,
          agentHolder(sub, stack, "up", "grpc"),
        );
      }),
    "tunnels-kgw": () =>
      isolated(ctx, async (sub) => {
        const backend = await startBackend(sub);
        const stack = await startKgw(sub);
        const open = connectOpener(sub.pki, stack.frontendPort, `127.0.0.1:${backend.port}`);
        return measureGrowth(
          sub,
          "kgw idle tunnels",
          [stack.server, stack.agent!],
          oneFd,
          tunnelHolder(open),
        );
      }),
    "tunnels-relay": () =>
      isolated(ctx, async (sub) => {
        const backend = await startBackend(sub);
        const chain = await startRelayChain(sub, backend.port);
        return measureGrowth(
          sub,
          "relay idle connections",
          [chain.first, chain.second],
          twoFds,
          tunnelHolder(tcpOpener(chain.port)),
        );
      }),
    "tunnels-upstream": () =>
      isolated(ctx, async (sub) => {
        const backend = await startBackend(sub);
        const stack = await startUpstream(sub, "connect");
        const open = connectOpener(sub.pki, stack.frontendPort, `127.0.0.1:${backend.port}`);
        return measureGrowth(
          sub,
          "upstream idle tunnels",
          [stack.server, stack.agent!],
          oneFd,
          tunnelHolder(open),
        );
      }),
  };
  const selected = (Object.keys(measure) as Measurement[]).filter(
    (m) => ctx.upstream || !m.endsWith("upstream"),
  );
  /** Each measurement's growth, one entry per round; an error ends its measuring. */
  const results = new Map<Measurement, Growth[] | Error>();
  await eachRound(ctx, async (round) => {
    for (const m of roundOrder(selected, round)) {
      const sofar = results.get(m) ?? [];
      if (sofar instanceof Error) continue;
      const g = await attempt(ctx, m, measure[m]);
      results.set(m, g instanceof Error ? g : [...sofar, g]);
    }
  });

  /** The figure of process `proc` at the i-th requested count, round by round. */
  const cell = (m: Measurement, i: number, proc: number): Cell => {
    const r = results.get(m);
    if (r === undefined) return { na: "not measured" };
    if (r instanceof Error) return { error: r.message };
    const entries = r.map((g) => [...g.values()]).map((e) => e[Math.min(i, e.length - 1)]);
    const perItem = entries.map((e) => e?.perItem[proc]);
    if (perItem.length === 0 || perItem.some((v) => v === undefined)) return { error: "not measured" };
    const c = roundsCell(perItem as number[]);
    const count = entries[0]!.count;
    return count === requested[i] ? c : { ...c, note: `at ${count.toLocaleString("en-US")}` };
  };
  const up = (m: Measurement, i: number, proc: number): Cell =>
    ctx.upstream ? cell(m, i, proc) : upstreamNa(ctx);
  const agents = { kgw: "agents-kgw", upstream: "agents-upstream" } as const;
  const tunnels = { kgw: "tunnels-kgw", relay: "tunnels-relay", upstream: "tunnels-upstream" } as const;

  const rows: Row[] = [];
  requested.forEach((count, i) => {
    const n = count.toLocaleString("en-US");
    rows.push({
      name: `server RSS per idle agent stream, ${n} agents`,
      unit: "KiB",
      better: "lower",
      targets: [{ kind: "atMost", value: 64 }, { kind: "upstream" }],
      cells: {
        kgw: cell(agents.kgw, i, 0),
        direct: { na: "no agents without a tunnel" },
        relay: { na: "no agents without a tunnel" },
        upstream: up(agents.upstream, i, 0),
      },
    });
  });
  requested.forEach((count, i) => {
    const n = count.toLocaleString("en-US");
    rows.push({
      name: `server RSS per idle tunneled connection, ${n}`,
      unit: "KiB",
      better: "lower",
      targets: [{ kind: "atMost", value: 16 }, { kind: "upstream" }],
      cells: {
        kgw: cell(tunnels.kgw, i, 0),
        direct: { na: "no process between client and backend" },
        relay: cell(tunnels.relay, i, 0),
        upstream: up(tunnels.upstream, i, 0),
      },
    });
  });
  requested.forEach((count, i) => {
    const n = count.toLocaleString("en-US");
    rows.push({
      name: `agent RSS per idle tunneled connection, ${n}`,
      unit: "KiB",
      better: "lower",
      targets: [{ kind: "upstream" }],
      cells: {
        kgw: cell(tunnels.kgw, i, 1),
        direct: { na: "no process between client and backend" },
        relay: cell(tunnels.relay, i, 1),
        upstream: up(tunnels.upstream, i, 1),
      },
    });
  });
  return rows;
}
