/**
 * `npm run bench`: starts everything on loopback, runs the scenarios of bench/scenarios and
 * prints one table per scenario, every kgw figure next to its baselines measured in the same run.
 * See docs/PERFORMANCE.md.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { build, distIsFresh } from "./harness/build.js";
import { parseArgs, sizesFor, USAGE } from "./harness/cli.js";
import { cpuSnapshot, describeMachine, fdLimit, otherLoad } from "./harness/machine.js";
import { RunOutput } from "./harness/output.js";
import { type BenchPki, createBenchPki } from "./harness/pki.js";
import { installCleanup, stopAllChildren } from "./harness/procs.js";
import { Scope } from "./harness/scope.js";
import { methodLines, renderResults, renderScenario } from "./harness/table.js";
import type { BenchContext, BenchOptions, BenchResults, ScenarioResult } from "./harness/types.js";
import { goVersion, type UpstreamBinaries, upstreamBinaries } from "./harness/upstream.js";
import { errorMessage, withTimeout } from "./harness/util.js";
import { VERBOSITY } from "./harness/verbosity.js";
import { SCENARIOS } from "./scenarios/index.js";

const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);

async function resolveUpstream(o: BenchOptions): Promise<{ bins: UpstreamBinaries | null; na: string }> {
  if (o.upstream === "off") return { bins: null, na: "upstream column off (--upstream=off)" };
  if ((await goVersion()) === null) {
    if (o.upstream === "on") throw new Error("--upstream=on but go is not on the PATH");
    return { bins: null, na: "go is not on the PATH" };
  }
  try {
    return { bins: await upstreamBinaries(log), na: "" };
  } catch (err) {
    if (o.upstream === "on") throw err;
    log(`upstream build failed, no upstream column: ${errorMessage(err)}`);
    return { bins: null, na: "upstream build failed" };
  }
}

async function main(argv: string[]): Promise<number> {
  const parsed = parseArgs(argv);
  if (parsed === "help") {
    process.stdout.write(USAGE);
    return 0;
  }
  const o = parsed;
  if (o.list) {
    for (const s of SCENARIOS)
      process.stdout.write(`${s.name.padEnd(12)} ${s.title}\n${" ".repeat(13)}${s.description}\n`);
    return 0;
  }
  if (o.render) {
    const results = JSON.parse(readFileSync(o.render, "utf8")) as BenchResults;
    process.stdout.write(renderResults(results, o.markdown));
    return 0;
  }
  const unknown = o.only.filter((n) => !SCENARIOS.some((s) => s.name === n));
  if (unknown.length) throw new Error(`unknown scenario(s) ${unknown.join(", ")}; see --list`);
  const selected = o.only.length ? SCENARIOS.filter((s) => o.only.includes(s.name)) : SCENARIOS;

  let pki: BenchPki | undefined;
  installCleanup(() => pki?.remove());

  if (!distIsFresh()) {
    if (!o.build) log("dist/ is older than lib/ or services/ (--no-build: using it anyway)");
    else {
      log("dist/ is older than lib/ or services/: npm run build");
      await build();
    }
  }
  const upstream = await resolveUpstream(o);
  pki = await createBenchPki();
  const machine = await describeMachine(upstream.bins !== null);
  const output = RunOutput.create(o.outDir, "kgw-bench-");
  const results: BenchResults = {
    command: `npm run bench${argv.length ? ` -- ${argv.join(" ")}` : ""}`,
    startedAt: new Date().toISOString(),
    quick: o.quick,
    rounds: o.rounds,
    verbosity: VERBOSITY,
    outputDir: output.dir,
    machine,
    scenarios: [],
  };
  for (const line of methodLines(results)) log(line);
  const scenarioTimeoutMs = o.quick ? 60_000 : 30 * 60_000;

  for (const scenario of selected) {
    log(`${scenario.name}: ${scenario.title}`);
    const scope = new Scope();
    const section = output.section(scenario.name);
    const ctx: BenchContext = {
      options: o,
      sizes: sizesFor(o.quick),
      pki,
      upstream: upstream.bins,
      upstreamNa: upstream.na,
      fdLimit: fdLimit(),
      scope,
      output: section,
      roundLoads: [],
      log,
    };
    const started = Date.now();
    const result: ScenarioResult = {
      name: scenario.name,
      title: scenario.title,
      rows: [],
      seconds: 0,
      otherCores: 0,
      stealCores: 0,
    };
    const cpuBefore = cpuSnapshot();
    try {
      result.rows = await withTimeout(scenario.run(ctx), scenarioTimeoutMs, `scenario ${scenario.name}`);
    } catch (err) {
      result.error = errorMessage(err);
      log(`${scenario.name} failed: ${result.error}`);
    } finally {
      await scope.close();
    }
    result.seconds = (Date.now() - started) / 1000;
    const load = otherLoad(cpuBefore, cpuSnapshot());
    result.otherCores = load.other;
    result.stealCores = load.steal;
    result.rounds = ctx.roundLoads;
    result.logs = section.volumes();
    results.scenarios.push(result);
    // Each table as soon as it is done, on stderr, so a long run shows progress.
    process.stderr.write(`\n${renderScenario(result, false)}\n`);
  }
  await stopAllChildren();

  process.stdout.write(`\n${renderResults(results, o.markdown)}`);
  if (o.json) {
    writeFileSync(o.json, `${JSON.stringify(results, null, 2)}\n`);
    log(`results written to ${o.json}`);
  }
  log(`child process output in ${output.dir}`);
  const failed = results.scenarios.some(
    (s) => s.error || s.rows.some((r) => Object.values(r.cells).some((c) => c?.error)),
  );
  return failed ? 1 : 0;
}

// Output piped into `head` and the like: a closed stdout is not an error of the benchmark.
process.stdout.on("error", (err: NodeJS.ErrnoException) => {
  if (err.code !== "EPIPE") throw err;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Client libraries may keep timers alive for a while; nothing is left to wait for.
    setTimeout(() => process.exit(code), 500).unref();
  },
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(2);
  },
);
