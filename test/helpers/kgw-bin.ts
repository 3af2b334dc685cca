/**
 * Runs `node bin/kgw.js …` as an operator's shell does: the bundled CLI (`npm run build` first),
 * standard input not a terminal unless run under `script` (a real pseudo-terminal).
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

export const REPO = fileURLToPath(new URL("../..", import.meta.url));
export const KGW_BIN = fileURLToPath(new URL("../../bin/kgw.js", import.meta.url));
/** What `npm run build` makes: the tsc output tests import, and the bundle bin/kgw.js runs. */
const COMPILED = ["../../dist/services/kgw.js", "../../dist/bundle/kgw.js"].map((p) =>
  fileURLToPath(new URL(p, import.meta.url)),
);

export interface BinResult {
  code: number | null;
  out: string;
  err: string;
}

export interface BinOptions {
  env?: Record<string, string>;
  /** Arguments for node before bin/kgw.js (--import hooks). */
  nodeArgs?: string[];
  /** Written to standard input, which is then closed; default: closed at once. */
  input?: string;
}

export function requireBuild(): void {
  if (!COMPILED.every((f) => existsSync(f)))
    throw new Error("dist/ is missing: run `npm run build` before this suite");
}

export function runKgwBin(args: string[], options: BinOptions = {}): Promise<BinResult> {
  return runProcess(process.execPath, [...(options.nodeArgs ?? []), KGW_BIN, ...args], options);
}

export function runProcess(command: string, args: string[], options: BinOptions = {}): Promise<BinResult> {
  const child = spawn(command, args, {
    cwd: REPO,
    env: { ...process.env, ...options.env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    err += d.toString();
  });
  child.stdin.end(options.input ?? "");
  return new Promise((resolve) => child.once("close", (code) => resolve({ code, out, err })));
}

/**
 * `kgw args…` on a real terminal (util-linux `script` gives it a pseudo-terminal): once `prompt`
 * appears, `answer` is typed. Output is the terminal's, standard output and error together.
 */
export function runKgwOnTerminal(
  args: string[],
  prompt: string,
  answer: string,
  env: Record<string, string>,
) {
  const line = [process.execPath, KGW_BIN, ...args].map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(" ");
  const child = spawn("script", ["-qec", line, "/dev/null"], {
    cwd: REPO,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let out = "";
  let typed = false;
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
    if (!typed && out.includes(prompt)) {
      typed = true;
      child.stdin.write(`${answer}\n`);
    }
  });
  child.stderr.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return new Promise<{ code: number | null; out: string; asked: boolean }>((resolve) =>
    child.once("close", (code) => {
      child.stdin.destroy();
      resolve({ code, out, asked: typed });
    }),
  );
}
