/**
 * The dial path's cost table (issue 26): µs per step of a CONNECT dial with tenant mode, the audit
 * log and the fleet on, as hosted. A fleet of two `kgw server --registry-table` instances on the
 * run's DynamoDB, each with --audit-log and --dial-step-metrics, the tenant's agent on the first,
 * where every dial enters (the peer hop is `peer-hop`'s). Sequential dials, each a new mTLS
 * connection, as kube-apiserver opens them, timed in two places:
 *  - by the client (this process): TCP connect (accept), TLS handshake, CONNECT request to its
 *    200, 200 to the first byte of the backend's answer to a PING;
 *  - by the server, per step (lib/observability/dial-steps.ts): from the request head read to the
 *    caller identified, the audit tracker made, the policy asked, the quota taken, an agent chosen
 *    and asked, the agent's answer (200 written), the first byte handed to the caller; read as the
 *    growth of kgw_server_dial_step_seconds' sum over its count between two scrapes around a
 *    round's dials (warm-up dials are not counted).
 * Also the CPU each process spent per dial over the round's dials (/proc, user + system): the
 * entry instance, the other instance (its share of the fleet's work) and the agent; a load-robust
 * figure where the step times above are wall time on a shared machine.
 * Every dial must count once in every server step: a dial missing from one fails the round.
 */
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { DIAL_STEPS } from "../../lib/observability/dial-steps.js";
import { type BenchFleet, startBenchFleet } from "../harness/fleet-stack.js";
import { metric, scrape } from "../harness/metrics-scrape.js";
import { ping } from "../harness/paths.js";
import type { BenchPki } from "../harness/pki.js";
import { LOOPBACK } from "../harness/ports.js";
import { eachRound } from "../harness/rounds.js";
import { startBackend } from "../harness/stacks.js";
import type { BenchContext, Cell, Row, Scenario } from "../harness/types.js";
import { now } from "../harness/util.js";
import { roundsCell } from "./common.js";

/** Dials per round; the warm-up's are not counted. */
const DIALS = 400;
const QUICK_DIALS = 10;
const WARMUP_DIALS = 50;
const QUICK_WARMUP_DIALS = 2;
/** How long one dial may take before the round fails. */
const DIAL_TIMEOUT_MS = 15_000;
const STEP_METRIC = "kgw_server_dial_step_seconds";

/** The client's view of one dial, ms from the start of the connection. */
const CLIENT_STEPS = [
  "accept (TCP connect)",
  "TLS handshake",
  "CONNECT to 200",
  "200 to first byte",
] as const;

export const dialSteps: Scenario = {
  name: "dial-steps",
  title: "The dial path, step by step: a CONNECT dial in tenant mode with audit and the fleet on",
  description:
    "Sequential CONNECT dials, each on a new mTLS connection, into a fleet instance (DynamoDB " +
    "registry, tenant mode, --audit-log) holding the tenant's agent. Client-side: TCP connect, " +
    "TLS handshake, CONNECT to 200, 200 to the first byte of the backend's answer. Server-side, " +
    "with --dial-step-metrics: mean µs per step (identity, audit, policy, quota, routing, agent " +
    "round trip, first byte) from kgw_server_dial_step_seconds; and the CPU per dial of each " +
    "instance and the agent (/proc, over the round's dials). No baseline: the table is where the " +
    "time goes, not a comparison.",
  run,
};

/** One timed CONNECT dial: the client's marks, in ms since the TCP connect began. */
function timedDial(pki: BenchPki, port: number, target: string): Promise<number[]> {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const marks: number[] = [];
    const socket: TLSSocket = tlsConnect({
      host: LOOPBACK,
      port,
      servername: "localhost",
      ca: pki.caPem,
      cert: pki.frontendCertPem,
      key: pki.frontendKeyPem,
    });
    const timer = setTimeout(() => fail(new Error("dial timed out")), DIAL_TIMEOUT_MS);
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.on("error", fail);
    socket.once("connect", () => marks.push(now() - t0));
    socket.once("secureConnect", () => {
      marks.push(now() - t0);
      socket.setNoDelay(true);
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    });
    let head = Buffer.alloc(0);
    const onHead = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      socket.off("data", onHead);
      socket.pause();
      const status = head.subarray(0, head.indexOf("\r\n")).toString();
      if (!/^HTTP\/1\.1 200 /.test(status)) return fail(new Error(`CONNECT answered ${status}`));
      marks.push(now() - t0);
      ping(socket, head.subarray(end + 4)).then(() => {
        marks.push(now() - t0);
        clearTimeout(timer);
        socket.destroy();
        resolve(marks);
      }, fail);
    };
    socket.on("data", onHead);
  });
}

/** Per server step: the histogram's sum (s) and count, summed over the instances. */
async function readSteps(fleet: BenchFleet): Promise<Map<string, { sum: number; count: number }>> {
  const texts = await Promise.all(fleet.instances.map((i) => scrape(i.adminPort)));
  const out = new Map<string, { sum: number; count: number }>();
  for (const step of DIAL_STEPS) {
    const label = `step="${step}"`;
    out.set(step, {
      sum: texts.reduce((a, t) => a + metric(t, `${STEP_METRIC}_sum`, label), 0),
      count: texts.reduce((a, t) => a + metric(t, `${STEP_METRIC}_count`, label), 0),
    });
  }
  return out;
}

async function run(ctx: BenchContext): Promise<Row[]> {
  const quick = ctx.options.quick;
  const dials = quick ? QUICK_DIALS : DIALS;
  const backend = await startBackend(ctx);
  const target = `${LOOPBACK}:${backend.port}`;
  const fleet = await startBenchFleet(ctx, 2, 0, (label) => [
    "--dial-step-metrics",
    `--audit-log=${ctx.output.fileFor(`${label}-audit`)}`,
  ]);
  const entry = fleet.instances[0]!;
  const clientRounds: number[][] = CLIENT_STEPS.map(() => []);
  const serverRounds = new Map<string, number[]>(DIAL_STEPS.map((s) => [s, []]));
  /** µs of CPU per dial, per round: the entry instance, the other instance, the agent. */
  const cpuRounds: number[][] = [[], [], []];
  const cpuOf = () => [...fleet.instances.map((i) => i.server.cpuSeconds()), fleet.agent.cpuSeconds()];
  let failure: string | undefined;
  await eachRound(ctx, async () => {
    if (failure) return;
    try {
      for (let i = 0; i < (quick ? QUICK_WARMUP_DIALS : WARMUP_DIALS); i++)
        await timedDial(fleet.callers, entry.agentPort, target);
      const before = await readSteps(fleet);
      const perStep: number[][] = CLIENT_STEPS.map(() => []);
      const cpuBefore = cpuOf();
      for (let i = 0; i < dials; i++) {
        const marks = await timedDial(fleet.callers, entry.agentPort, target);
        // ms since the start → µs of each step.
        for (const [k, m] of marks.entries()) perStep[k]!.push((m - (k === 0 ? 0 : marks[k - 1]!)) * 1000);
      }
      const cpuAfter = cpuOf();
      const after = await readSteps(fleet);
      for (const [k, c] of cpuAfter.entries()) cpuRounds[k]!.push(((c - cpuBefore[k]!) / dials) * 1e6);
      for (const [k, v] of perStep.entries()) clientRounds[k]!.push(v.reduce((a, b) => a + b, 0) / v.length);
      for (const step of DIAL_STEPS) {
        const count = after.get(step)!.count - before.get(step)!.count;
        if (count !== dials) throw new Error(`server step ${step}: ${count} of ${dials} dials counted`);
        serverRounds.get(step)!.push(((after.get(step)!.sum - before.get(step)!.sum) / count) * 1e6);
      }
    } catch (err) {
      failure = err instanceof Error ? err.message : String(err);
      ctx.log(`  dial-steps: ${failure}`);
    }
  });
  const cell = (rounds: number[]): Cell => (failure ? { error: failure } : roundsCell(rounds));
  const row = (name: string, rounds: number[]): Row => ({
    name,
    unit: "µs",
    better: "lower",
    noRatios: true,
    cells: {
      kgw: cell(rounds),
      direct: { na: "no baseline" },
      relay: { na: "no baseline" },
      upstream: { na: "no step marks" },
    },
  });
  return [
    ...CLIENT_STEPS.map((s, k) => row(`client: ${s} (mean)`, clientRounds[k]!)),
    ...DIAL_STEPS.map((s) => row(`server: ${s} (mean)`, serverRounds.get(s)!)),
    row("CPU per dial: entry instance", cpuRounds[0]!),
    row("CPU per dial: other instance", cpuRounds[1]!),
    row("CPU per dial: agent", cpuRounds[2]!),
  ];
}
