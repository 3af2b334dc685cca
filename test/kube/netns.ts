/**
 * The suite's private network namespace (`ip netns add`, as root). Its only interface is its own
 * `lo`, holding 127.0.0.1 and the test addresses of topology.ts, so no process started in it can
 * send a packet anywhere else. Processes run in it with `ip netns exec`, which execs the program
 * in place: the child's pid is the program's own, which the tunnel proof relies on.
 */
import { execFile, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { Proc } from "../interop/harness.js";

const PREFIX = "kgw-kube-";

export class NetNs {
  /** Every process started in the namespace, in order (for logs after the run). */
  readonly procs: Proc[] = [];

  private constructor(readonly name: string) {}

  /** Creates `kgw-kube-<pid>` with `lo` up and `addresses` on it. */
  static create(addresses: readonly string[]): NetNs {
    removeStaleNamespaces();
    const ns = new NetNs(`${PREFIX}${process.pid}`);
    ip("netns", "add", ns.name);
    created.add(ns.name);
    ip("-n", ns.name, "link", "set", "lo", "up");
    for (const a of addresses) ip("-n", ns.name, "addr", "add", `${a}/32`, "dev", "lo");
    return ns;
  }

  /** Starts `bin args…` inside the namespace. */
  spawn(name: string, bin: string, args: string[]): Proc {
    const proc = new Proc(name, "ip", ["netns", "exec", this.name, bin, ...args]);
    this.procs.push(proc);
    return proc;
  }

  /** Writes the kept output of every process to `<dir>/<n>-<name>.log`. */
  saveLogs(dir: string): void {
    fs.mkdirSync(dir, { recursive: true });
    this.procs.forEach((p, i) => {
      const file = `${String(i).padStart(2, "0")}-${p.name.replace(/[^\w.-]+/g, "_")}.log`;
      fs.writeFileSync(path.join(dir, file), `${p.lines.join("\n")}\n`);
    });
  }

  /** Runs a short command inside the namespace and returns its stdout. */
  run(bin: string, args: string[]): Promise<string> {
    return new Promise((resolve, reject) =>
      execFile("ip", ["netns", "exec", this.name, bin, ...args], { timeout: 10_000 }, (err, out, errOut) =>
        err ? reject(new Error(`${bin} ${args.join(" ")}: ${err.message}\n${errOut}`)) : resolve(out),
      ),
    );
  }

  /** Deletes the namespace (its processes must be gone first, or it lingers until they are). */
  delete(): void {
    if (!created.delete(this.name)) return;
    spawnSync("ip", ["netns", "del", this.name], { stdio: "ignore" });
  }
}

const created = new Set<string>();

function ip(...args: string[]): void {
  const r = spawnSync("ip", args, { encoding: "utf8" });
  if (r.status !== 0) throw new Error(`ip ${args.join(" ")} failed: ${r.stderr || r.error?.message}`);
}

/**
 * Namespaces left by an earlier run of this suite that was killed before its teardown: named after
 * a process that no longer exists and holding no process. Only our own prefix is touched.
 */
function removeStaleNamespaces(): void {
  const list = spawnSync("ip", ["netns", "list"], { encoding: "utf8" }).stdout ?? "";
  for (const line of list.split("\n")) {
    const name = line.split(" ")[0] ?? "";
    const m = new RegExp(`^${PREFIX}(\\d+)$`).exec(name);
    if (!m || pidAlive(Number(m[1]))) continue;
    const pids = spawnSync("ip", ["netns", "pids", name], { encoding: "utf8" }).stdout?.trim();
    if (!pids) spawnSync("ip", ["netns", "del", name], { stdio: "ignore" });
  }
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Last resort when the worker is ended before afterAll: on "exit" the interop harness SIGKILLs
 * every child it started (registered first, so it runs first) and the namespace goes. A signal
 * would end the process without "exit", so turn it into one.
 */
process.once("exit", () => {
  for (const name of created) spawnSync("ip", ["netns", "del", name], { stdio: "ignore" });
});
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  process.once(signal, () => process.exit(128 + (os.constants.signals[signal] ?? 0)));
}
