/**
 * Child processes of the benchmark. Each runs in its own process group (detached), so stopping
 * it also stops anything it started; all of them are killed when the benchmark exits, fails or
 * is interrupted. Nothing is ever killed by name.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { REPO_ROOT } from "./repo.js";
import { sleep, withTimeout } from "./util.js";

const KEEP_LINES = 400;

export class Child {
  readonly process: ChildProcess;
  /** The last KEEP_LINES lines of stdout and stderr, for error messages. */
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly lineWaiters = new Set<(line: string) => void>();

  constructor(
    readonly name: string,
    command: string,
    args: readonly string[],
    env: Record<string, string> = {},
  ) {
    this.process = spawn(command, args, {
      cwd: REPO_ROOT,
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, ...env },
    });
    let partial = "";
    const onData = (d: Buffer) => {
      const parts = (partial + d.toString()).split("\n");
      partial = parts.pop() ?? "";
      for (const line of parts) {
        this.lines.push(line);
        for (const w of this.lineWaiters) w(line);
      }
      if (this.lines.length > KEEP_LINES) this.lines.splice(0, this.lines.length - KEEP_LINES);
    };
    this.process.stdout!.on("data", onData);
    this.process.stderr!.on("data", onData);
    this.exited = new Promise((resolve) => {
      this.process.once("exit", (code, signal) => resolve({ code, signal }));
      // A failed spawn (ENOENT) emits "error" and never "exit".
      this.process.once("error", (err) => {
        this.lines.push(String(err));
        resolve({ code: -1, signal: null });
      });
    });
    running.add(this);
    void this.exited.then(() => running.delete(this));
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

  /** Resolves with the first output line matching `pred`; fails if the process exits first. */
  waitForLine(pred: (line: string) => boolean, ms: number): Promise<string> {
    const found = this.lines.find(pred);
    if (found !== undefined) return Promise.resolve(found);
    let waiter: ((line: string) => void) | undefined;
    const seen = new Promise<string>((resolve, reject) => {
      waiter = (line) => {
        if (pred(line)) resolve(line);
      };
      this.lineWaiters.add(waiter);
      void this.exited.then(({ code, signal }) =>
        reject(new Error(`${this.name} exited (code ${code}, signal ${signal})\n${this.tail()}`)),
      );
    });
    return withTimeout(seen, ms, `${this.name} start`).finally(() => {
      if (waiter) this.lineWaiters.delete(waiter);
    });
  }

  /** SIGTERM to the process group, SIGKILL after `graceMs`. */
  async stop(graceMs = 3000): Promise<void> {
    if (!this.alive) return;
    signalGroup(this, "SIGTERM");
    const exited = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!exited) {
      signalGroup(this, "SIGKILL");
      await Promise.race([this.exited, sleep(2000)]);
    }
  }

  tail(n = 30): string {
    return `--- ${this.name} (pid ${this.pid}), last ${n} lines ---\n${this.lines.slice(-n).join("\n")}`;
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
