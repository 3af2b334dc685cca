/**
 * Runs the `kgw` CLI from source in a child process (through tsx), for tests that need a real
 * process to kill or signal.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const ENTRY = fileURLToPath(new URL("./kgw-entry.ts", import.meta.url));

export interface KgwProcess {
  child: ChildProcess;
  output: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function spawnKgw(args: string[], env: Record<string, string> = {}): KgwProcess {
  const child = spawn(process.execPath, ["--import", "tsx", ENTRY, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  child.stdout!.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr!.on("data", (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return { child, output, exited };
}
