/**
 * `npm run soak`: one kgw server, two of our agents and a backend, each a child process on
 * loopback, under a mixed load for --minutes (30 by default): dials, transfers with every byte
 * checked, agent restarts (graceful and crashes), slow TLS handshakes. Every minute it reads the
 * server's RSS, JavaScript heap and open descriptors; at the end it prints a table and a summary
 * line (growth from minute 2 to the end) and writes the samples as JSON. Not part of CI. See
 * docs/PERFORMANCE.md, "Soak".
 */
import { setMaxListeners } from "node:events";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { build, distIsFresh } from "./harness/build.js";
import { describeMachine } from "./harness/machine.js";
import { RunOutput } from "./harness/output.js";
import { type BenchPki, createBenchPki } from "./harness/pki.js";
import { installCleanup, stopAllChildren } from "./harness/procs.js";
import { Scope } from "./harness/scope.js";
import { type StackContext, startBackend, startKgwServer } from "./harness/stacks.js";
import { errorMessage, sleep } from "./harness/util.js";
import { VERBOSITY } from "./harness/verbosity.js";
import { Agents, runAgentRestarts } from "./soak/agent-restarts.js";
import { runDialers } from "./soak/dialers.js";
import {
  BASELINE_MINUTE,
  DRAIN_AFTER_LOAD_MS,
  parseSoakArgs,
  SAMPLE_EVERY_MS,
  STOP_LISTENERS,
  USAGE,
} from "./soak/options.js";
import { renderTable, type SoakSample, summaryLine } from "./soak/report.js";
import { probeEnv, readServer } from "./soak/server-sampler.js";
import { runSlowHandshakes } from "./soak/slow-handshakes.js";
import { Tally } from "./soak/tally.js";
import { runTransfers } from "./soak/transfers.js";

/** How often the end of the drain after the load is checked. */
const DRAIN_POLL_MS = 250;

const log = (m: string) => process.stderr.write(`[soak] ${m}\n`);

async function main(argv: string[]): Promise<number> {
  const o = parseSoakArgs(argv);
  if (o === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  let pki: BenchPki | undefined;
  installCleanup(() => pki?.remove());
  if (!distIsFresh()) {
    if (!o.build) log("dist/ is older than lib/ or services/ (--no-build: using it anyway)");
    else {
      log("dist/ is older than lib/ or services/: npm run build");
      await build();
    }
  }
  pki = await createBenchPki();
  const output = RunOutput.create(o.outDir, "kgw-soak-");
  const probeDir = output.section("heap-probe").dir;
  const scope = new Scope();
  const ctx: StackContext = { pki, scope, output, options: {}, childEnv: probeEnv(probeDir) };
  const startedAt = new Date().toISOString();
  log(`child process output in ${output.dir}; log verbosity ${VERBOSITY}`);

  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const stack = await startKgwServer(ctx);
  const agents = new Agents(ctx, stack);
  await agents.startAll();

  const tally = new Tally();
  const samples: SoakSample[] = [];
  const sample = async (minute: number | null) => {
    const reading = await readServer(stack.server, probeDir);
    samples.push({ minute, at: new Date().toISOString(), ...reading, counts: tally.snapshot() });
    const c = tally.counts;
    const when = minute === null ? "after the load" : `minute ${minute}`;
    log(
      `${when}: RSS ${(reading.rssKiB / 1024).toFixed(1)} MiB, fds ${reading.fds}, ` +
        `dials ${c.dialsOk} ok / ${c.dialsFailed} failed, ` +
        `transfers ${c.transfersOk} ok / ${c.transfersFailed} failed, ` +
        `${c.agentRestarts} agent restarts, ${c.slowClosedByServer} slow closed`,
    );
  };
  await sample(0);

  const stop = new AbortController();
  setMaxListeners(STOP_LISTENERS, stop.signal);
  const load = Promise.all([
    runDialers(pki, stack.frontendPort, target, tally, stop.signal),
    runTransfers(pki, stack.frontendPort, target, tally, stop.signal),
    runAgentRestarts(agents, tally, log, stop.signal),
    runSlowHandshakes([stack.frontendPort, stack.agentPort], tally, stop.signal),
  ]);
  const loadStarted = Date.now();
  let serverDied = false;
  for (let minute = 1; minute <= o.minutes; minute++) {
    await sleep(Math.max(0, loadStarted + minute * SAMPLE_EVERY_MS - Date.now()));
    if (!stack.server.alive) {
      serverDied = true;
      log(`the server exited\n${stack.server.tail()}`);
      break;
    }
    await sample(minute);
  }
  stop.abort();
  await load;

  if (!serverDied) {
    // Everything the load opened is closed now: the server should give its descriptors back.
    const idleFds = samples[0]!.fds;
    const deadline = Date.now() + DRAIN_AFTER_LOAD_MS;
    while (Date.now() < deadline && (await readServer(stack.server, probeDir)).fds > idleFds) {
      await sleep(DRAIN_POLL_MS);
    }
    await sample(null);
  }
  await scope.close();
  await stopAllChildren();

  const summary = summaryLine(samples, Math.min(BASELINE_MINUTE, o.minutes), tally);
  process.stdout.write(`\n${renderTable(samples)}\n\n${summary}\n`);
  if (tally.errors.length)
    process.stdout.write(
      `unexpected failures (first ${tally.errors.length}):\n  ${tally.errors.join("\n  ")}\n`,
    );
  const json = o.json ?? path.join(output.dir, "soak.json");
  const results = {
    command: `npm run soak${argv.length ? ` -- ${argv.join(" ")}` : ""}`,
    startedAt,
    minutes: o.minutes,
    machine: await describeMachine(false),
    verbosity: VERBOSITY,
    outputDir: output.dir,
    serverDied,
    samples,
    totals: tally.counts,
    slowLifetimesMs: tally.slowLifetimesMs,
    unexpectedFailures: tally.errors,
    summary,
  };
  writeFileSync(json, `${JSON.stringify(results, null, 2)}\n`);
  log(`samples written to ${json}; child process output in ${output.dir}`);
  const c = tally.counts;
  return serverDied || c.dialsFailed > 0 || c.transfersFailed > 0 || c.agentRestartsFailed > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Client libraries may keep timers alive for a while; nothing is left to wait for.
    setTimeout(() => process.exit(code), 500).unref();
  },
  (err: unknown) => {
    process.stderr.write(`soak: ${errorMessage(err)}\n`);
    process.exit(2);
  },
);
