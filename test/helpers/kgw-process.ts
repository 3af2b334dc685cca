/**
 * Runs the `kgw` CLI from source in a child process (through tsx), for tests that need a real
 * process to kill or signal.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { announcedPorts } from "./endpoints.js";

const ENTRY = fileURLToPath(new URL("./kgw-entry.ts", import.meta.url));

export interface KgwProcess {
  child: ChildProcess;
  /** stdout and stderr, as they came. */
  output: string[];
  /** stdout alone. */
  stdout: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnKgw(args: string[], env: Record<string, string> = {}): KgwProcess {
  const child = spawn(process.execPath, ["--import", "tsx", ENTRY, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  const stdout: string[] = [];
  child.stdout!.on("data", (d: Buffer) => {
    output.push(d.toString());
    stdout.push(d.toString());
  });
  child.stderr!.on("data", (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output, stdout, exited };
}

export interface AnnouncingKgwProcess extends KgwProcess {
  /**
   * The ports the process announced in its --ports-file, once it has bound them all; rejects if
   * it exits first (with the end of its output, for the reader of a failed test) or takes longer
   * than `timeoutMs`.
   */
  ports(timeoutMs?: number): Promise<Record<string, number>>;
}

/** `spawnKgw` with --ports-file in a directory of its own, removed when the process exits. */
export function spawnKgwAnnouncing(args: string[], env: Record<string, string> = {}): AnnouncingKgwProcess {
  const dir = mkdtempSync(path.join(tmpdir(), "kgw-ports-"));
  const file = path.join(dir, "ports.json");
  const p = spawnKgw([...args, `--ports-file=${file}`], env);
  let exited = false;
  void p.exited.then(() => {
    exited = true;
    rmSync(dir, { recursive: true, force: true });
  });
  const ports = async (timeoutMs = 15_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const announced = exited ? null : announcedPorts(file);
      if (announced) return announced;
      if (exited || Date.now() > deadline) {
        const why = exited
          ? "exited before announcing its ports"
          : `announced no ports within ${timeoutMs}ms`;
        throw new Error(`kgw ${args[0]} ${why}: ${p.output.join("").slice(-2000)}`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  return { ...p, ports };
}
