/**
 * The `kgw` processes `npm run fleet:local` starts, each with its log in the run's directory: start
 * one, wait for a condition while watching that the processes it depends on are still running (one
 * that exits fails the wait at once, with its reason: a taken port said as such), read the ports a
 * process announced in its --ports-file, stop them all.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { openSync, readFileSync } from "node:fs";
import path from "node:path";
import { LOCAL_POLL_MS, LOCAL_START_MS } from "./durations.js";

/** What avoids a taken port, for every message that reports one. */
export const BUSY_PORT_ADVICE =
  "start the fleet on other ports with --base-port=<another base> or --ephemeral-ports";

/** Lines of a process's log a failure message quotes. */
const LOG_TAIL_LINES = 5;

export class LocalProcesses {
  private readonly children = new Map<string, ChildProcess>();

  constructor(
    /** Where the logs go (the run's temporary directory). */
    private readonly dir: string,
    /** bin/kgw.js. */
    private readonly kgw: string,
  ) {}

  /** Starts `kgw <args>` as `name`, its output to <dir>/<name>.log. */
  run(name: string, args: string[], env: Record<string, string>): ChildProcess {
    const log = openSync(path.join(this.dir, `${name}.log`), "a");
    const child = spawn(process.execPath, [this.kgw, ...args], {
      stdio: ["ignore", log, log],
      env: { ...process.env, ...env },
    });
    this.children.set(name, child);
    return child;
  }

  running(name: string): boolean {
    const c = this.children.get(name);
    return c !== undefined && c.exitCode === null && c.signalCode === null;
  }

  pid(name: string): number | undefined {
    return this.children.get(name)?.pid;
  }

  /** Sends `signal` to `name` and resolves once it has exited. */
  async kill(name: string, signal: NodeJS.Signals): Promise<void> {
    const c = this.children.get(name);
    if (!c || !this.running(name)) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill(signal);
    await exited;
  }

  /** Polls `check` until it holds; a process of `watch` that exits first fails it at once. */
  async until(
    what: string,
    check: () => Promise<boolean>,
    watch: string[],
    ms = LOCAL_START_MS,
  ): Promise<void> {
    const deadline = Date.now() + ms;
    while (!(await check())) {
      for (const name of watch) {
        if (this.children.has(name) && !this.running(name)) throw this.exitedError(name);
      }
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms / 1000}s`);
      await new Promise((r) => setTimeout(r, LOCAL_POLL_MS));
    }
  }

  /** The ports `name` announced in its --ports-file, once it has. */
  async announced(name: string, file: string): Promise<Record<string, number>> {
    let ports: Record<string, number> | null = null;
    await this.until(`${name} listening`, async () => {
      try {
        ports = JSON.parse(readFileSync(file, "utf8")) as Record<string, number>;
      } catch {
        // not written yet (it is renamed into place whole)
      }
      return ports !== null;
    }, [name]);
    return ports!;
  }

  /** SIGTERM to every running process, SIGKILL to those still running after `graceMs`. */
  async stopAll(graceMs: number): Promise<void> {
    const names = [...this.children.keys()].filter((n) => this.running(n));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(names.map((n) => this.kill(n, "SIGTERM"))),
      new Promise<void>((r) => {
        timer = setTimeout(r, graceMs);
      }),
    ]);
    clearTimeout(timer);
    this.killAllNow();
  }

  /** SIGKILL to every running process, synchronously (for the process's exit hook). */
  killAllNow(): void {
    for (const [name, c] of this.children) if (this.running(name)) c.kill("SIGKILL");
  }

  /** Why `name` stopped: a taken port said as such, else its exit and the end of its log. */
  private exitedError(name: string): Error {
    const c = this.children.get(name)!;
    let log = "";
    try {
      log = readFileSync(path.join(this.dir, `${name}.log`), "utf8");
    } catch {
      // no log: the message says how it exited
    }
    const busy = /EADDRINUSE[^\n"]*/.exec(log);
    if (busy)
      return new Error(
        `${name} could not listen (${busy[0]}): a port is already in use; ${BUSY_PORT_ADVICE}`,
      );
    const tail = log.trim().split("\n").slice(-LOG_TAIL_LINES).join("\n  ");
    return new Error(`${name} exited (${c.exitCode ?? c.signalCode}) before it was ready:\n  ${tail}`);
  }
}
