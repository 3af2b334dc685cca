/**
 * Keeps the benchmark (bench/, `npm run bench`) from rotting: runs it with tiny sizes, two rounds,
 * no upstream column and kgw in tenant mode in a child process and checks that every scenario
 * printed its table with a figure for every round in every row, recorded the machine's other load
 * per round, and left each child's output in a file of its own. No timing assertions: CI machines are too noisy for
 * them, and the figures belong to docs/PERFORMANCE.md, not to a test.
 */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import type { BenchResults, Cell } from "../../bench/harness/types.js";
import { HOP_SYSTEM, NOISY_SYSTEM, SYSTEMS, TENANT_SYSTEM } from "../../bench/harness/types.js";
import { SCENARIOS } from "../../bench/scenarios/index.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const RUN_MS = 300_000;
/** Two, so that per-round ratios and ranges are exercised. */
const ROUNDS = 2;
/** The scenarios that measure kgw in tenant mode when asked (--tenant-mode). */
const TENANT_SCENARIOS = ["throughput", "dial"];
/**
 * The scenario that measures a quiet tenant alone (kgw) and next to a noisy tenant at its limits
 * (NOISY_SYSTEM), whatever the flags; its rows that count the noisy tenant's own dials have a
 * figure next to the noisy tenant only.
 */
const NOISY_SCENARIO = "fairness";
/**
 * The scenarios whose first rows are measured by clients that are not ours, each its own
 * process: curl (HTTP CONNECT) first, then the Go konnectivity-client (gRPC), then ours.
 */
const EXTERNAL_CLIENT_SCENARIOS = ["throughput", "wan", "dial"];
const CURL = "(curl";
const GO_CLIENT = "(Go konnectivity-client";
/** The Go client is built with `go`; without it its rows say so instead of a figure. */
const HAS_GO = spawnSync("go", ["version"], { stdio: "ignore" }).status === 0;
/** The scenario that measures a dial through a peer hop (HOP_SYSTEM) next to one instance (kgw). */
const HOP_SCENARIO = "peer-hop";

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runBench(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    // Its own process group, so that a stuck run can be stopped with everything it started.
    const child = spawn(process.execPath, ["--import", "tsx", "bench/run.ts", ...args], {
      cwd: ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    // SIGTERM lets the benchmark stop its own children; SIGKILL if it does not end.
    const stop = setTimeout(() => {
      stderr += "\n[smoke test] timed out, stopping the benchmark\n";
      child.kill("SIGTERM");
      setTimeout(() => {
        try {
          process.kill(-child.pid!, "SIGKILL");
        } catch {
          // already gone
        }
      }, 5000).unref();
    }, RUN_MS);
    child.once("exit", (code) => {
      clearTimeout(stop);
      resolve({ code, stdout, stderr });
    });
  });
}

const isFigure = (c: Cell | undefined) =>
  c !== undefined && typeof c.value === "number" && Number.isFinite(c.value);

describe("npm run bench -- --quick --rounds 2 --upstream=off --tenant-mode", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "kgw-bench-smoke-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it(
    "prints a table for every scenario with a figure in every row",
    async () => {
      const json = path.join(dir, "results.json");
      const out = path.join(dir, "children");
      const run = await runBench([
        "--quick",
        `--rounds=${ROUNDS}`,
        "--upstream=off",
        "--tenant-mode",
        "--json",
        json,
        "--out-dir",
        out,
      ]);
      const why = `exit ${run.code}\n${run.stdout}\n${run.stderr.split("\n").slice(-60).join("\n")}`;
      expect(run.code, why).toBe(0);

      const results = JSON.parse(readFileSync(json, "utf8")) as BenchResults;
      expect(results.quick).toBe(true);
      expect(results.rounds).toBe(ROUNDS);
      expect(results.machine.cores, why).toBeGreaterThan(0);
      expect(results.outputDir).toBe(out);
      expect(run.stdout).toContain(`log verbosity: ${results.verbosity}`);
      expect(run.stdout).toContain("tenant mode/kgw");
      expect(run.stdout).toContain("noisy/alone");
      expect(results.scenarios.map((s) => s.name)).toEqual(SCENARIOS.map((s) => s.name));
      for (const scenario of results.scenarios) {
        expect(scenario.error, `${scenario.name}: ${why}`).toBeUndefined();
        expect(scenario.rows.length, scenario.name).toBeGreaterThan(0);
        expect(
          scenario.rounds?.map((r) => r.round),
          scenario.name,
        ).toEqual([1, 2]);
        // Every child wrote into a file of its own under the scenario's section, none into a pipe.
        expect(scenario.logs?.length ?? 0, `${scenario.name}: child output files`).toBeGreaterThan(0);
        for (const l of scenario.logs ?? [])
          expect(existsSync(path.join(out, scenario.name, l.file))).toBe(true);
        expect(run.stdout).toContain(scenario.title);
        if (EXTERNAL_CLIENT_SCENARIOS.includes(scenario.name)) {
          // curl's rows, then the Go client's, then the in-process clients', each client in
          // processes of its own whose output is in files of their own.
          const kinds = scenario.rows.map((r) =>
            r.name.includes(CURL) ? "curl" : r.name.includes(GO_CLIENT) ? "go" : "ours",
          );
          const firstOurs = kinds.indexOf("ours");
          expect(kinds.slice(0, firstOurs).sort(), scenario.name).toEqual(kinds.slice(0, firstOurs));
          expect(kinds.filter((k) => k === "curl").length, scenario.name).toBeGreaterThanOrEqual(2);
          expect(kinds.filter((k) => k === "go").length, scenario.name).toBeGreaterThanOrEqual(2);
          expect(kinds.slice(firstOurs), scenario.name).not.toContain("curl");
          expect(kinds.slice(firstOurs), scenario.name).not.toContain("go");
          const files = (scenario.logs ?? []).map((l) => l.file);
          expect(files.filter((f) => f.startsWith("curl")).length, scenario.name).toBeGreaterThan(0);
          expect(files, scenario.name).toContain("http-backend.log");
          if (HAS_GO)
            expect(files.filter((f) => f.startsWith("go-client")).length, scenario.name).toBeGreaterThan(0);
        }
        for (const row of scenario.rows) {
          const where = `${scenario.name} / ${row.name}`;
          if (row.name.includes(CURL)) {
            // curl measures the baselines too: straight to the backend, and through the relays.
            for (const system of ["direct", "relay"] as const) {
              expect(row.cells[system]?.rounds, `${where} / ${system}`).toHaveLength(ROUNDS);
            }
          }
          if (row.name.includes(GO_CLIENT) && !HAS_GO) {
            expect(row.cells.kgw?.na, where).toContain("go");
            continue;
          }
          expect(run.stdout, where).toContain(row.name);
          // Every cell is a figure or a stated n/a; none failed.
          for (const system of SYSTEMS) {
            const cell = row.cells[system];
            expect(cell?.error, `${where} / ${system}`).toBeUndefined();
            expect(isFigure(cell) || typeof cell?.na === "string", `${where} / ${system}`).toBe(true);
            // A figure is a median over rounds and keeps each round's.
            if (isFigure(cell)) expect(cell?.rounds, `${where} / ${system}`).toHaveLength(ROUNDS);
          }
          // Ours always has a figure (calibration rows may leave it to the baselines; the
          // fairness rows about the noisy tenant's storm have none alone, and say why).
          const noisy = row.cells[NOISY_SYSTEM];
          if (scenario.name === NOISY_SCENARIO) {
            expect(isFigure(noisy), `${where} / ${NOISY_SYSTEM}`).toBe(true);
            expect(noisy?.rounds, `${where} / ${NOISY_SYSTEM}`).toHaveLength(ROUNDS);
            if (!row.name.startsWith("noisy tenant:")) expect(isFigure(row.cells.kgw), where).toBe(true);
            else expect(row.cells.kgw?.na, where).toBeTypeOf("string");
          } else {
            expect(noisy, where).toBeUndefined();
            if (scenario.name !== "calibration") expect(isFigure(row.cells.kgw), where).toBe(true);
          }
          // Through a peer hop: a figure per round in its scenario, absent elsewhere.
          const hop = row.cells[HOP_SYSTEM];
          if (scenario.name === HOP_SCENARIO && !row.name.startsWith("registry")) {
            expect(isFigure(hop), `${where} / ${HOP_SYSTEM}`).toBe(true);
            expect(hop?.rounds, `${where} / ${HOP_SYSTEM}`).toHaveLength(ROUNDS);
          } else if (scenario.name === HOP_SCENARIO) {
            // The registry's requests are the fleet's, one figure for both paths.
            expect(hop?.na, where).toBeTypeOf("string");
          } else expect(hop, where).toBeUndefined();
          // kgw in tenant mode: a figure per round where it is measured, absent elsewhere.
          const tenant = row.cells[TENANT_SYSTEM];
          if (TENANT_SCENARIOS.includes(scenario.name)) {
            expect(isFigure(tenant), `${where} / ${TENANT_SYSTEM}`).toBe(true);
            expect(tenant?.rounds, `${where} / ${TENANT_SYSTEM}`).toHaveLength(ROUNDS);
          } else expect(tenant, where).toBeUndefined();
          expect(row.cells.upstream?.na, where).toBeTypeOf("string");
        }
      }
    },
    RUN_MS + 10_000,
  );
});
