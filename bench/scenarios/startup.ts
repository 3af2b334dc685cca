/**
 * Start to listening (issue 26): how soon a started server accepts connections on its agent port,
 * which decides how fast a replaced or restarted instance serves again. Three servers, each
 * started and stopped STARTS times per round, their starts interleaved (one of each in turn, the
 * order rotating), each timed from the spawn until its agent port accepts a TCP connection
 * (harness/listen.ts):
 *  - kgw as the drop-in (the in-memory registry), as `scale` starts it;
 *  - kgw as hosted: `--registry-table` on the run's DynamoDB (dynalite, a process of its own,
 *    started once per round), tenant mode and a peer port (fleet-stack.ts);
 *  - upstream's proxy-server (gRPC mode, no agent).
 * Every start is a restart in the sense that matters: the files are in the page cache, and
 * Node's compile cache (bin/kgw.js) holds what the previous start compiled, as in a task that is
 * replaced on the same image. Each round's figure is the p50 and the p90 of its starts.
 * Beside the time, the CPU the server's process (every thread) had used when its port was first
 * seen accepting, from Linux's per-thread schedstat: on a loaded machine the time measures the
 * scheduler as much as the start, the CPU much less so.
 */

import { readdir, readFile } from "node:fs/promises";
import {
  instancePorts,
  type PeerFiles,
  startDynalite,
  startFleetInstance,
  writePeerFiles,
} from "../harness/fleet-stack.js";
import { timeToListen } from "../harness/listen.js";
import { localAwsEnv } from "../harness/local-aws.js";
import type { Child } from "../harness/procs.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { Scope } from "../harness/scope.js";
import { type StackContext, startKgwServer, startUpstream } from "../harness/stacks.js";
import type { BenchContext, Cell, Row, Scenario } from "../harness/types.js";
import { now } from "../harness/util.js";
import { Samples, upstreamNa } from "./common.js";

/** Starts of each server per round: enough for a p90 that is not the maximum. */
const STARTS = 20;
const QUICK_STARTS = 2;

type Server = "kgw" | "kgw-hosted" | "upstream";

export const startup: Scenario = {
  name: "startup",
  title: "Start to listening: from exec until the agent port accepts connections",
  description:
    "Each server is started and stopped many times per round, the starts of the three interleaved: " +
    "kgw as the drop-in (in-memory registry), kgw as hosted (--registry-table on a local DynamoDB, " +
    "tenant mode, a peer port) and upstream's proxy-server; each start timed from the spawn until " +
    "its agent port accepts a TCP connection. Figures: the p50 and p90 of a round's starts.",
  run,
};

/** The hosted server's DynamoDB and peer certificate, made once per round. */
interface Hosted {
  env: Record<string, string>;
  peerFiles: PeerFiles;
}

const NO_PROC = "no /proc/<pid>/task/*/schedstat (Linux only)";

/** One start: ms from spawn to listening, and the process's CPU ms by then (null off Linux). */
interface Start {
  ms: number;
  cpuMs: number | null;
}

/**
 * The CPU every thread of process `pid` has used so far, in ms: the first field of each
 * /proc/<pid>/task/<tid>/schedstat (ns on the CPU). Threads count because V8 compiles and
 * collects garbage on its own. Null where there is no such file (not Linux).
 */
async function cpuMsOf(pid: number | undefined): Promise<number | null> {
  if (pid === undefined) return null;
  try {
    const tasks = await readdir(`/proc/${pid}/task`);
    const ns = await Promise.all(
      tasks.map(async (t) =>
        Number((await readFile(`/proc/${pid}/task/${t}/schedstat`, "utf8")).split(" ")[0]),
      ),
    );
    return ns.reduce((a, b) => a + b, 0) / 1e6;
  } catch {
    return null;
  }
}

/** Starts `server` in a scope of its own, stops it, and resolves with its time to listen. */
async function oneStart(ctx: BenchContext, server: Server, hosted: Hosted): Promise<Start> {
  const scope = new Scope();
  let listening: Promise<Start> | undefined;
  const sub: StackContext & Pick<BenchContext, "upstream"> = {
    ...ctx,
    scope,
    onServerSpawn: (child: Child, agentPort: number) => {
      listening = timeToListen(child, agentPort, now()).then(async (ms) => ({
        ms,
        cpuMs: await cpuMsOf(child.process.pid),
      }));
    },
  };
  try {
    if (server === "kgw") await startKgwServer(sub);
    else if (server === "upstream") await startUpstream(sub, "grpc", { agent: false });
    else await startFleetInstance(sub, hosted.env, hosted.peerFiles, await instancePorts(), "kgw-hosted");
    if (!listening) throw new Error(`${server}: its spawn was not reported`);
    return await listening;
  } finally {
    await scope.close();
  }
}

async function run(ctx: BenchContext): Promise<Row[]> {
  const starts = ctx.options.quick ? QUICK_STARTS : STARTS;
  const servers: Server[] = ctx.upstream ? ["kgw", "kgw-hosted", "upstream"] : ["kgw", "kgw-hosted"];
  const samples = new Samples(ctx);
  /** The servers whose CPU could be read (Linux's /proc): elsewhere the CPU rows say n/a. */
  const cpuSeen = new Set<Server>();
  await eachRound(ctx, async (round) => {
    const roundScope = new Scope();
    try {
      const dynamoPort = await startDynalite({ ...ctx, scope: roundScope });
      const hosted: Hosted = { env: localAwsEnv(dynamoPort), peerFiles: await writePeerFiles(ctx) };
      const times = new Map<Server, Start[]>(servers.map((s) => [s, []]));
      for (let i = 0; i < starts; i++) {
        for (const server of roundOrder(servers, round * starts + i)) {
          if (samples.failed(server)) continue;
          try {
            times.get(server)!.push(await oneStart(ctx, server, hosted));
          } catch (err) {
            samples.fail(server, err);
          }
        }
      }
      for (const server of servers) {
        const got = times.get(server)!;
        await samples.takeRound(server, async () => got.map((t) => t.ms));
        const cpu = got.flatMap((t) => (t.cpuMs === null ? [] : [t.cpuMs]));
        if (cpu.length > 0) {
          cpuSeen.add(server);
          await samples.takeRound(`${server}-cpu`, async () => cpu);
        }
      }
    } finally {
      await roundScope.close();
    }
  });

  const upstream = (key: string, p: number): Cell =>
    ctx.upstream ? samples.percentileCell(key, p) : upstreamNa(ctx);
  const row = (name: string, server: Server, p: number): Row => ({
    name,
    unit: "ms",
    better: "lower",
    // The target, and upstream beside it.
    targets: [{ kind: "atMost", value: 100 }, { kind: "upstream" }],
    cells: {
      kgw: samples.percentileCell(server, p),
      direct: { na: "no server" },
      relay: { na: "no server" },
      upstream: upstream("upstream", p),
    },
  });
  const cpuRow = (name: string, server: Server): Row => ({
    name,
    unit: "ms",
    better: "lower",
    targets: [{ kind: "upstream" }],
    cells: {
      kgw: cpuSeen.has(server) ? samples.percentileCell(`${server}-cpu`, 50) : { na: NO_PROC },
      direct: { na: "no server" },
      relay: { na: "no server" },
      upstream: !ctx.upstream || cpuSeen.has("upstream") ? upstream("upstream-cpu", 50) : { na: NO_PROC },
    },
  });
  return [
    row("start to listening, drop-in (memory registry), p50", "kgw", 50),
    row("start to listening, drop-in (memory registry), p90", "kgw", 90),
    row("start to listening, hosted (DynamoDB registry, tenant mode, peer port), p50", "kgw-hosted", 50),
    row("start to listening, hosted (DynamoDB registry, tenant mode, peer port), p90", "kgw-hosted", 90),
    cpuRow("CPU used by then (all threads), drop-in, p50", "kgw"),
    cpuRow("CPU used by then (all threads), hosted, p50", "kgw-hosted"),
  ];
}
