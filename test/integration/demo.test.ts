/**
 * `kgw demo` as a newcomer runs it, in a child process: a port already taken ends it at once with
 * a message naming the port and --ephemeral-ports (it used to print EADDRINUSE and hang), and the
 * temporary directory it writes a CA key and private keys to is gone after every way out: --once,
 * a busy port, SIGTERM, two signals in a row. Each run gets a TMPDIR of its own, so "gone" means
 * no kgw-demo-* directory in it.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, expect, it } from "vitest";
import { DEMO_PORTS } from "../../lib/demo/local-stack.js";
import { announcedPorts, httpGet } from "../helpers/endpoints.js";
import { waitUntil } from "../helpers/fleet.js";
import { spawnKgw } from "../helpers/kgw-process.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A TMPDIR for one demo run, removed after the test (whatever the demo left in it). */
function ownTmpdir(): string {
  const dir = mkdtempSync(path.join(tmpdir(), "kgw-demo-test-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** What the demo made in `tmp` (tsx, which runs it from source here, keeps a cache there too). */
const demoDirs = (tmp: string) => readdirSync(tmp).filter((name) => name.startsWith("kgw-demo-"));

/** Holds `port` on 127.0.0.1; false when something else already holds it (busy either way). */
function hold(port: number): Promise<boolean> {
  const server: Server = createServer();
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => {
      cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
      resolve(true);
    });
  });
}

it("a busy port ends the demo at once with exit code 1, naming the port and --ephemeral-ports, and no directory left", async () => {
  // Every default port is taken (by this test, or already by something else), so whichever the
  // demo binds first is busy.
  for (const port of Object.values(DEMO_PORTS)) await hold(port);
  const tmp = ownTmpdir();
  const demo = spawnKgw(["demo", "--once"], { TMPDIR: tmp });
  const { code } = await demo.exited;
  const out = demo.output.join("");
  expect(code, out).toBe(1);
  expect(out).toMatch(/kgw demo: port \d+ is already in use/);
  expect(out).toContain("kgw demo --ephemeral-ports");
  expect(out).not.toMatch(/\n\s+at /); // a message, not a stack
  expect(demoDirs(tmp)).toEqual([]);
});

it("--once removes its directory (CA key and private keys) when it is done", async () => {
  const tmp = ownTmpdir();
  const demo = spawnKgw(["demo", "--once", "--ephemeral-ports"], { TMPDIR: tmp });
  const { code } = await demo.exited;
  const out = demo.output.join("");
  expect(code, out).toBe(0);
  expect(out).toMatch(/answer {2}: 200 hello from inside the cluster/);
  expect(out).toMatch(/Certificates: .*kgw-demo-.* \(removed when the demo stops\)/);
  expect(demoDirs(tmp)).toEqual([]);
});

it.each([
  ["SIGTERM", ["SIGTERM"], [0]],
  ["SIGINT", ["SIGINT"], [0]],
  // The second signal exits at once (130); if the first one's stop was already done, 0.
  ["two signals in a row", ["SIGTERM", "SIGINT"], [0, 130]],
] as const)("%s stops a running demo and removes its directory", async (_name, signals, codes) => {
  const tmp = ownTmpdir();
  const portsFile = path.join(ownTmpdir(), "ports.json");
  const demo = spawnKgw(["demo", "--ephemeral-ports", `--ports-file=${portsFile}`], { TMPDIR: tmp });
  cleanups.push(() => {
    if (demo.child.exitCode === null && demo.child.signalCode === null) demo.child.kill("SIGKILL");
  });
  await waitUntil(
    () => {
      if (demo.child.exitCode !== null) throw new Error(`demo exited: ${demo.output.join("")}`);
      return announcedPorts(portsFile) !== null;
    },
    30_000,
    "the demo's --ports-file",
  );
  const ports = announcedPorts(portsFile)!;
  expect((await httpGet(`127.0.0.1:${ports.health}`, "/readyz")).status).toBe(200);
  const [made] = demoDirs(tmp);
  expect(made).toMatch(/^kgw-demo-/);
  expect(existsSync(path.join(tmp, made!, "ca.pem"))).toBe(true);

  for (const s of signals) demo.child.kill(s);
  const { code } = await demo.exited;
  expect(codes as readonly number[], demo.output.join("")).toContain(code);
  expect(demoDirs(tmp)).toEqual([]);
  // Removed on a clean exit, as kgw server's is (a second signal's exit is not one).
  if (code === 0) expect(existsSync(portsFile)).toBe(false);
  // Its listeners are closed with it.
  expect((await httpGet(`127.0.0.1:${ports.health}`, "/readyz")).status).toBe(0);
});
