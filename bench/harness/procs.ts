/**
 * Child processes of the benchmark. Each runs in its own process group (detached), so stopping
 * it also stops anything it started; all of them are killed when the benchmark exits, fails or
 * is interrupted. Nothing is ever killed by name.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, fstatSync, openSync, readFileSync, readSync } from "node:fs";
import { REPO_ROOT } from "./repo.js";
import { sleep } from "./util.js";

/** How much of the end of a child's output file error messages quote. */
const TAIL_BYTES = 64 * 1024;
/** How long a SIGKILLed process may take to be reaped before we stop waiting for it. */
const KILL_WAIT_MS = 2000;
/** How often a start waits for its line to appear in the child's output file. */
const LINE_POLL_MS = 20;

export class Child {
  readonly process: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private exit: { code: number | null; signal: NodeJS.Signals | null } | null = null;
  private spawnError = "";

  /**
   * `logFile` receives the child's stdout and stderr (see output.ts for why not a pipe); the
   * benchmark reads it only to find a start-up line and to quote it in error messages.
   * `stdoutFile`, when given, takes stdout instead: for a command whose output is parsed
   * (`kgw tenant create --output=json`), so no log line can get into it. It is private (0600):
   * that output holds credentials.
   */
  constructor(
    readonly name: string,
    readonly logFile: string,
    command: string,
    args: readonly string[],
    env: Record<string, string> = {},
    stdoutFile?: string,
  ) {
    const fd = openSync(logFile, "a");
    const outFd = stdoutFile === undefined ? fd : openSync(stdoutFile, "a", 0o600);
    try {
      this.process = spawn(command, args, {
        cwd: REPO_ROOT,
        detached: true,
        stdio: ["ignore", outFd, fd],
        env: { ...process.env, ...env },
      });
    } finally {
      // The child holds its own copies of the descriptors from here on.
      closeSync(fd);
      if (outFd !== fd) closeSync(outFd);
    }
    this.exited = new Promise((resolve) => {
      this.process.once("exit", (code, signal) => resolve({ code, signal }));
      // A failed spawn (ENOENT) emits "error" and never "exit".
      this.process.once("error", (err) => {
        this.spawnError = String(err);
        resolve({ code: -1, signal: null });
      });
    });
    running.add(this);
    void this.exited.then((e) => {
      this.exit = e;
      running.delete(this);
    });
  }

  get pid(): number {
    return this.process.pid ?? -1;
  }

  get alive(): boolean {
    return this.process.exitCode === null && this.process.signalCode === null && this.pid > 0;
  }

  /** Resident set size of the process itself (VmRSS), in KiB. */
  rssKiB(): number {
    const status = readFileSync(`/proc/${this.pid}/status`, "utf8");
    const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(status);
    if (!m) throw new Error(`no VmRSS for ${this.name} (pid ${this.pid})`);
    return Number(m[1]);
  }

  /**
   * User + system CPU time of the process so far, in seconds (/proc/<pid>/stat; clock ticks are
   * USER_HZ, 100 on Linux).
   */
  cpuSeconds(): number {
    const stat = readFileSync(`/proc/${this.pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  }

  /**
   * The first line of the child's output matching `pred`, polling its output file; fails if the
   * process exits first or `ms` pass.
   */
  async waitForLine(pred: (line: string) => boolean, ms: number): Promise<string> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = readFileSync(this.logFile, "utf8").split("\n").find(pred);
      if (found !== undefined) return found;
      if (this.exit) {
        const { code, signal } = this.exit;
        throw new Error(`${this.name} exited (code ${code}, signal ${signal})\n${this.tail()}`);
      }
      if (Date.now() > deadline)
        throw new Error(`${this.name} start: no result within ${ms} ms\n${this.tail()}`);
      await sleep(LINE_POLL_MS);
    }
  }

  /** SIGKILL to the process group at once (a crash); resolves once the process is gone. */
  async kill(): Promise<void> {
    if (!this.alive) return;
    signalGroup(this, "SIGKILL");
    await Promise.race([this.exited, sleep(KILL_WAIT_MS)]);
  }

  /** SIGTERM to the process group, SIGKILL after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (!this.alive) return;
    signalGroup(this, "SIGTERM");
    const exited = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!exited) {
      signalGroup(this, "SIGKILL");
      await Promise.race([this.exited, sleep(KILL_WAIT_MS)]);
    }
  }

  /** The last `n` lines of the child's output file, for error messages. */
  tail(n = 30): string {
    const lines = [...lastLines(this.logFile, n), ...(this.spawnError ? [this.spawnError] : [])];
    return `--- ${this.name} (pid ${this.pid}, ${this.logFile}), last ${n} lines ---\n${lines.join("\n")}`;
  }
}

function lastLines(file: string, n: number): string[] {
  let fd: number | undefined;
  try {
    fd = openSync(file, "r");
    const size = fstatSync(fd).size;
    const buf = Buffer.alloc(Math.min(size, TAIL_BYTES));
    const got = readSync(fd, buf, 0, buf.length, size - buf.length);
    return buf.subarray(0, got).toString().trimEnd().split("\n").slice(-n);
  } catch {
    return [];
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

function signalGroup(child: Child, signal: NodeJS.Signals): void {
  try {
    // A negative pid addresses the process group the child leads (spawned detached).
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.process.kill(signal);
    } catch {
      // already gone
    }
  }
}

const running = new Set<Child>();

/** The process groups of the children still running (each child leads its own). */
export function childProcessGroups(): number[] {
  return [...running].map((c) => c.pid).filter((pid) => pid > 0);
}

/** Stops every child still running (each by its own process group). */
export async function stopAllChildren(): Promise<void> {
  await Promise.all([...running].map((c) => c.stop(1500)));
}

let installed = false;

/**
 * Makes sure no child outlives the benchmark: on normal exit, on SIGINT/SIGTERM/SIGHUP and on an
 * uncaught error, every child's process group gets SIGKILL.
 */
export function installCleanup(onExit: () => void = () => {}): void {
  if (installed) return;
  installed = true;
  const killAll = () => {
    for (const c of running) if (c.alive) signalGroup(c, "SIGKILL");
    onExit();
  };
  process.once("exit", killAll);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nbench: ${signal}, stopping all child processes\n`);
      killAll();
      process.exit(130);
    });
  }
  process.on("uncaughtException", (err) => {
    process.stderr.write(`bench: uncaught ${err.stack ?? err}\n`);
    killAll();
    process.exit(1);
  });
  // A stray rejection (a client library failing a promise nobody awaits any more) is reported
  // but does not end a run that may be minutes in.
  process.on("unhandledRejection", (err) => {
    process.stderr.write(`bench: unhandled rejection ${err instanceof Error ? err.stack : String(err)}\n`);
  });
}
