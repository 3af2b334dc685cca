/**
 * `npm run fleet:local` (scripts/local-fleet.ts) as an operator runs it: a taken port is reported
 * as such, with the flags that avoid it, before anything starts; --once shows a request through
 * the load balancer, the instance holding acme's agent killed, the agent on the two others and a
 * request through the balancer still answered; and the temporary directory holding the CA key and
 * private keys is gone after every way out, SIGTERM included, with every instance stopped. Each
 * run gets a TMPDIR of its own, so "gone" means no kgw-local-fleet-* directory in it.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { closedPort } from "../helpers/backends.js";
import { announcedPorts, httpGet } from "../helpers/endpoints.js";
import { waitUntil } from "../helpers/fleet.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SCRIPT = path.join(ROOT, "scripts", "local-fleet.ts");

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Run {
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

/** The script as `npm run fleet:local -- …` runs it, with a TMPDIR of its own. */
function fleetLocal(args: string[], tmp: string): Run {
  // bin/kgw.js, which the script starts its instances with, runs the compiled dist/.
  if (!existsSync(path.join(ROOT, "dist", "services", "kgw.js")))
    throw new Error("run `npm run build` first");
  const child = spawn(process.execPath, ["--import", "tsx", SCRIPT, ...args], {
    cwd: ROOT,
    env: { ...process.env, TMPDIR: tmp },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  child.stdout!.on("data", (d: Buffer) => output.push(d.toString()));
  child.stderr!.on("data", (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((r) => child.once("exit", (code) => r(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  });
  return { child, output, exited };
}

function ownTmpdir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "kgw-fleet-local-test-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The `kgw` processes `pid` started (its instances and agent; not tsx's esbuild), by `ps`. */
function childPids(pid: number): number[] {
  try {
    return execFileSync("ps", ["-o", "pid=,args=", "--ppid", String(pid)], { encoding: "utf8" })
      .split("\n")
      .filter((l) => l.includes("bin/kgw.js"))
      .map((l) => Number.parseInt(l.trim(), 10))
      .filter((n) => n > 0);
  } catch {
    return []; // ps exits 1 when there are none
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const fleetDirs = (tmp: string) => readdirSync(tmp).filter((n) => n.startsWith("kgw-local-fleet-"));

it("a taken port stops it before anything starts: exit 1, the port and what it is for, --base-port and --ephemeral-ports", async () => {
  // A base whose first port, the balancer's (base+32, the first one checked), this test holds.
  const held = await closedPort();
  const base = held - 32;
  const server: Server = createServer();
  await new Promise<void>((r) => server.listen(held, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  const tmp = ownTmpdir();
  const run = fleetLocal(["--once", `--base-port=${base}`], tmp);
  const code = await run.exited;
  const out = run.output.join("");
  expect(code, out).toBe(1);
  expect(out).toContain(`port ${held} (the load balancer) is already in use`);
  expect(out).toContain("--base-port=<another base> or --ephemeral-ports");
  expect(out).not.toContain("not within");
  expect(fleetDirs(tmp)).toEqual([]);
});

it("--once: requests through the balancer keep going when the instance holding acme's agent is killed, and the agent moves", async () => {
  const tmp = ownTmpdir();
  const run = fleetLocal(["--once", "--ephemeral-ports"], tmp);
  const code = await run.exited;
  const out = run.output.join("");
  expect(code, out).toBe(0);
  const before = /acme's agent holds streams to instance\(s\) (\d), (\d)\.\n/.exec(out);
  expect(before, out).not.toBeNull();
  const killed = /instance (\d) killed \(SIGKILL\)\.\n/.exec(out);
  expect(killed, out).not.toBeNull();
  // The killed instance was one the agent held, and the balancer took it out.
  expect([before![1], before![2]]).toContain(killed![1]);
  expect(out).toContain(`balancer: instance-${killed![1]} unhealthy`);
  const after = out.slice(killed!.index);
  const moved = /acme's agent holds streams to instance\(s\) (\d), (\d)\.\n/.exec(after);
  expect(moved, out).not.toBeNull();
  expect([moved![1], moved![2]]).not.toContain(killed![1]);
  expect(after).toContain("a request through the balancer: 200 hello from acme's cluster");
  for (const n of [1, 2, 3])
    expect(out).toContain(`a request entering at instance ${n}: 200 hello from acme's cluster`);
  expect(fleetDirs(tmp)).toEqual([]);
});

it("SIGTERM stops every instance, the balancer and the agent, and removes the directory", async () => {
  const tmp = ownTmpdir();
  const portsFile = path.join(ownTmpdir(), "ports.json");
  const run = fleetLocal(["--ephemeral-ports", `--ports-file=${portsFile}`], tmp);
  await waitUntil(
    () => {
      if (run.child.exitCode !== null) throw new Error(`fleet:local exited: ${run.output.join("")}`);
      return announcedPorts(portsFile) !== null;
    },
    60_000,
    "fleet:local's --ports-file",
  );
  const ports = announcedPorts(portsFile)!;
  const health = [1, 2, 3].map((n) => `127.0.0.1:${ports[`instance-${n}-health`]}`);
  for (const h of health) expect((await httpGet(h, "/readyz")).status).toBe(200);
  const [made] = fleetDirs(tmp);
  expect(existsSync(path.join(tmp, made!, "ca-key.pem"))).toBe(true);
  // What it prints for managing tenants in its table.
  const out = run.output.join("");
  expect(out).toMatch(/export AWS_ENDPOINT_URL_DYNAMODB=http:\/\/127\.0\.0\.1:\d+ AWS_REGION=\S+ /);
  expect(out).toContain("npx kgw tenant --table=kgw-local list");

  const started = childPids(run.child.pid!);
  expect(started.length).toBe(4); // three instances and the agent
  run.child.kill("SIGTERM");
  expect(await run.exited, run.output.join("")).toBe(0);
  expect(started.filter(alive)).toEqual([]);
  expect(fleetDirs(tmp)).toEqual([]);
  expect(existsSync(portsFile)).toBe(false);
  for (const h of health) expect((await httpGet(h, "/healthz")).status).toBe(0);
  expect((await httpGet(`127.0.0.1:${ports.balancer}`, "/")).status).toBe(0);
});

it("SIGTERM while the instances are starting still stops them all and removes the directory", async () => {
  const tmp = ownTmpdir();
  const run = fleetLocal(["--ephemeral-ports"], tmp);
  // The instances are being started once the first one's log exists.
  await waitUntil(
    () => {
      if (run.child.exitCode !== null) throw new Error(`fleet:local exited: ${run.output.join("")}`);
      const [made] = fleetDirs(tmp);
      return made !== undefined && existsSync(path.join(tmp, made, "instance-1.log"));
    },
    60_000,
    "instance 1 starting",
  );
  const started = childPids(run.child.pid!);
  expect(started.length).toBeGreaterThan(0);
  run.child.kill("SIGTERM");
  expect(await run.exited, run.output.join("")).toBe(0);
  expect(started.filter(alive)).toEqual([]);
  expect(run.output.join("")).not.toContain("local fleet:");
  expect(fleetDirs(tmp)).toEqual([]);
});
