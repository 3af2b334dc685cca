#!/usr/bin/env node
// Runs the vitest projects (tiers) one after another and prints what each took, then one closing
// line with the counts. Tiers run in sequence, not together, so that each one's time is its own
// wall time on this machine (within a tier, files still run in parallel), and so that a broken
// unit test is reported in seconds, before the slow tiers start.
//
//   node scripts/test-tiers.mjs                 unit, integration, system
//   node scripts/test-tiers.mjs unit integration
//
// Every tier runs even when an earlier one failed: CI shows all failures of a submission at once.
// The exit code is non-zero when any tier failed or a tier ran no test.
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const ALL_TIERS = ["unit", "integration", "system"];
const tiers = process.argv.slice(2);
for (const tier of tiers) {
  if (!ALL_TIERS.includes(tier)) {
    process.stderr.write(
      `test-tiers: unknown tier ${JSON.stringify(tier)} (tiers: ${ALL_TIERS.join(", ")})\n`,
    );
    process.exit(2);
  }
}

const vitest = join(import.meta.dirname, "..", "node_modules", ".bin", "vitest");
const reports = mkdtempSync(join(tmpdir(), "kgw-test-tiers-"));

function run(tier) {
  const outputFile = join(reports, `${tier}.json`);
  const started = process.hrtime.bigint();
  return new Promise((resolve) => {
    const child = spawn(
      vitest,
      ["run", "--project", tier, "--reporter=default", "--reporter=json", `--outputFile.json=${outputFile}`],
      { stdio: "inherit" },
    );
    child.on("exit", (code, signal) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      let counts = { passed: 0, failed: 0, failedSuites: 0 };
      try {
        const report = JSON.parse(readFileSync(outputFile, "utf8"));
        // A suite whose beforeAll fails skips its tests: counted here, or the summary would say
        // "0 failed" under a FAILED tier.
        counts = {
          passed: report.numPassedTests,
          failed: report.numFailedTests,
          failedSuites: report.numFailedTestSuites ?? 0,
        };
      } catch {
        // No report: vitest failed before running anything (a config or import error); the
        // exit code below says so.
      }
      resolve({ tier, seconds, code: code ?? (signal ? 128 : 1), ...counts });
    });
  });
}

const results = [];
for (const tier of tiers.length > 0 ? tiers : ALL_TIERS) results.push(await run(tier));
rmSync(reports, { recursive: true, force: true });

const line = (cells) => cells.map((c, i) => String(c).padStart(i === 0 ? 0 : 10)).join("");
process.stdout.write("\ntest tiers\n");
process.stdout.write(`${line(["tier".padEnd(12), "seconds", "passed", "failed", "result"])}\n`);
for (const r of results) {
  const result = r.code === 0 && r.passed > 0 ? "ok" : r.passed === 0 && r.code === 0 ? "no tests" : "FAILED";
  process.stdout.write(`${line([r.tier.padEnd(12), r.seconds.toFixed(1), r.passed, r.failed, result])}\n`);
}
const total = results.reduce((a, r) => ({ passed: a.passed + r.passed, failed: a.failed + r.failed }), {
  passed: 0,
  failed: 0,
});
const seconds = results.reduce((a, r) => a + r.seconds, 0);
process.stdout.write(`${line(["all".padEnd(12), seconds.toFixed(1), total.passed, total.failed, ""])}\n\n`);
const failedSuites = results.reduce((n, r) => n + r.failedSuites, 0);
const suites = failedSuites > 0 ? `, ${failedSuites} test files failed` : "";
process.stdout.write(`tests: ${total.passed} passed, ${total.failed} failed${suites}\n`);
process.exitCode = results.every((r) => r.code === 0 && r.passed > 0) ? 0 : 1;
