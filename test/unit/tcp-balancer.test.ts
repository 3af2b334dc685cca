/**
 * fleet:local's TCP load balancer (lib/demo/tcp-balancer.ts) with real loopback sockets: targets
 * are HTTP servers that answer /whoami with their name and /readyz with 200 or 503, as a gateway
 * instance's health port does. What an operator watching a local failover relies on: connections
 * spread over the healthy targets, a killed or unready target gets no new ones, a target that
 * comes back gets them again, a target's reset reaches the client as a reset, and nothing is left
 * open when the balancer closes.
 */
import { randomBytes } from "node:crypto";
import { createServer as createHttpServer, request, type Server } from "node:http";
import { type AddressInfo, connect, createServer as createNetServer, type Socket } from "node:net";
import { afterEach, expect, it } from "vitest";
import { addressInUse } from "../../lib/demo/address-in-use.js";
import { type BalancerTarget, TcpBalancer } from "../../lib/demo/tcp-balancer.js";
import { ConfigError } from "../../lib/errors.js";
import { waitUntil } from "../helpers/fleet.js";

/** Fast checks: the state changes after two results 20 ms apart. */
const HEALTH = { intervalMs: 20, timeoutMs: 100, threshold: 2 };

interface Target {
  name: string;
  server: Server;
  port: number;
  ready: boolean;
  /** The next this many checks get 503. */
  failChecks: number;
  close(): Promise<void>;
}

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startTarget(name: string): Promise<Target> {
  const server = createHttpServer((req, res) => {
    if (req.url === "/readyz") {
      const ok = t.ready && t.failChecks === 0;
      if (t.failChecks > 0) t.failChecks--;
      res.writeHead(ok ? 200 : 503).end();
    } else {
      res.end(name);
    }
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  let closed = false;
  const t: Target = {
    name,
    server,
    port: (server.address() as AddressInfo).port,
    ready: true,
    failChecks: 0,
    close: async () => {
      if (closed) return;
      closed = true;
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  cleanups.push(t.close);
  return t;
}

const asTarget = (t: Target): BalancerTarget => ({
  name: t.name,
  host: "127.0.0.1",
  port: t.port,
  healthUrl: `http://127.0.0.1:${t.port}/readyz`,
});

async function startBalancer(targets: Target[]): Promise<TcpBalancer> {
  const lb = await TcpBalancer.start({ host: "127.0.0.1", port: 0, health: HEALTH });
  cleanups.push(() => lb.close());
  lb.setTargets(targets.map(asTarget));
  return lb;
}

/** GET /whoami through the balancer on a fresh connection: the target's name, or the error code. */
function whoami(port: number): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path: "/whoami", agent: false }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => {
        body += d.toString();
      });
      res.on("end", () => resolve(body));
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end();
  });
}

const healthyNames = (lb: TcpBalancer) =>
  lb
    .targets()
    .filter((t) => t.healthy)
    .map((t) => t.name);

it("spreads new connections round-robin over the healthy targets", async () => {
  const targets = [await startTarget("a"), await startTarget("b"), await startTarget("c")];
  const lb = await startBalancer(targets);
  await waitUntil(() => healthyNames(lb).length === 3, 5_000, "three healthy targets");
  const seen: string[] = [];
  for (let i = 0; i < 6; i++) seen.push(await whoami(lb.port));
  expect(seen.sort()).toEqual(["a", "a", "b", "b", "c", "c"]);
  expect(lb.targets().map((t) => t.connections)).toEqual([2, 2, 2]);
});

it("routes around a killed target at once, and marks it unhealthy after its checks fail", async () => {
  const [a, b] = [await startTarget("a"), await startTarget("b")];
  const lb = await startBalancer([a, b]);
  await waitUntil(() => healthyNames(lb).length === 2, 5_000, "two healthy targets");
  await a.close();
  // Before the checks notice: a refused connect is tried on the next target.
  const seen: string[] = [];
  for (let i = 0; i < 4; i++) seen.push(await whoami(lb.port));
  expect(seen).toEqual(["b", "b", "b", "b"]);
  await waitUntil(() => healthyNames(lb).join() === "b", 5_000, "a marked unhealthy");
  expect(await whoami(lb.port)).toBe("b");
});

it("sends no new connections to a target whose /readyz says 503 (draining), and again once it says 200", async () => {
  const [a, b] = [await startTarget("a"), await startTarget("b")];
  const changes: string[] = [];
  const lb = await TcpBalancer.start({
    host: "127.0.0.1",
    port: 0,
    health: HEALTH,
    onChange: (t) => changes.push(`${t.name} ${t.healthy ? "healthy" : "unhealthy"}`),
  });
  cleanups.push(() => lb.close());
  lb.setTargets([asTarget(a), asTarget(b)]);
  await waitUntil(() => healthyNames(lb).length === 2, 5_000, "two healthy targets");
  a.ready = false;
  await waitUntil(() => healthyNames(lb).join() === "b", 5_000, "a unhealthy");
  for (let i = 0; i < 3; i++) expect(await whoami(lb.port)).toBe("b");
  a.ready = true;
  await waitUntil(() => healthyNames(lb).length === 2, 5_000, "a healthy again");
  const seen = new Set<string>();
  for (let i = 0; i < 4; i++) seen.add(await whoami(lb.port));
  expect([...seen].sort()).toEqual(["a", "b"]);
  expect(changes.filter((c) => c.startsWith("a "))).toEqual(["a healthy", "a unhealthy", "a healthy"]);
});

it("one lost check is not a dead target: the state changes only after the threshold", async () => {
  const a = await startTarget("a");
  const changes: boolean[] = [];
  const lb = await TcpBalancer.start({
    host: "127.0.0.1",
    port: 0,
    health: HEALTH,
    onChange: (t) => changes.push(t.healthy),
  });
  cleanups.push(() => lb.close());
  lb.setTargets([asTarget(a)]);
  await waitUntil(() => healthyNames(lb).length === 1, 5_000, "a healthy");
  // Exactly one failing check among healthy ones: a must stay healthy throughout.
  const before = lb.checksDone;
  a.failChecks = 1;
  await waitUntil(
    () => a.failChecks === 0 && lb.checksDone >= before + 3,
    5_000,
    "the failed check and two more",
  );
  expect(changes).toEqual([true]);
});

it("a health endpoint that never answers is a failed check (timeout), not a hung balancer", async () => {
  const silent = createNetServer(() => {}); // accepts, never answers
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  const held: Socket[] = [];
  silent.on("connection", (s) => held.push(s));
  cleanups.push(
    () =>
      new Promise<void>((r) => {
        for (const s of held) s.destroy();
        silent.close(() => r());
      }),
  );
  const b = await startTarget("b");
  const lb = await TcpBalancer.start({ host: "127.0.0.1", port: 0, health: HEALTH });
  cleanups.push(() => lb.close());
  const silentPort = (silent.address() as AddressInfo).port;
  lb.setTargets([
    {
      name: "silent",
      host: "127.0.0.1",
      port: silentPort,
      healthUrl: `http://127.0.0.1:${silentPort}/readyz`,
    },
    asTarget(b),
  ]);
  await waitUntil(() => lb.checksDone >= 6, 5_000, "checks completing despite the silent target");
  expect(healthyNames(lb)).toEqual(["b"]);
  for (let i = 0; i < 3; i++) expect(await whoami(lb.port)).toBe("b");
});

it("fails open like the NLB, and with every target gone closes the client's connection instead of holding it", async () => {
  const a = await startTarget("a");
  const lb = await startBalancer([a]);
  // Before any check has passed, connections still go to the (only) target.
  expect(await whoami(lb.port)).toBe("a");
  await a.close();
  expect(await whoami(lb.port)).toMatch(/ECONNRESET|socket hang up/);
  await waitUntil(() => lb.openConnections === 0, 5_000, "no connection left open");
});

it("passes a target's reset on to the client as a reset", async () => {
  const resetter = createNetServer((s) => s.once("data", () => s.resetAndDestroy()));
  await new Promise<void>((r) => resetter.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => resetter.close(() => r())));
  const port = (resetter.address() as AddressInfo).port;
  const lb = await TcpBalancer.start({ host: "127.0.0.1", port: 0, health: HEALTH });
  cleanups.push(() => lb.close());
  lb.setTargets([{ name: "r", host: "127.0.0.1", port, healthUrl: `http://127.0.0.1:${port}/readyz` }]);
  const client = connect(lb.port, "127.0.0.1");
  const error = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
    client.on("error", (err) => resolve(err));
    client.on("close", () => resolve(null));
    client.once("connect", () => client.write("hello"));
  });
  client.destroy();
  expect(error?.code).toBe("ECONNRESET");
});

it("a busy port is refused with the port named, and close leaves nothing open", async () => {
  const first = await TcpBalancer.start({ host: "127.0.0.1", port: 0 });
  const err = await TcpBalancer.start({ host: "127.0.0.1", port: first.port }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ConfigError);
  expect(addressInUse(err)?.port).toBe(first.port);

  const a = await startTarget("a");
  first.setTargets([asTarget(a)]);
  const idle = connect(first.port, "127.0.0.1"); // a client that never sends a byte
  await waitUntil(() => first.openConnections >= 1, 5_000, "the idle client accepted");
  const before = process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  await first.close();
  await new Promise<void>((r) => (idle.destroyed ? r() : idle.once("close", () => r())));
  await waitUntil(() => first.openConnections === 0, 5_000, "every socket closed");
  // Its health-check timer is gone with it.
  expect(process.getActiveResourcesInfo().filter((r) => r === "Timeout").length).toBeLessThan(before);
});

it("passes any bytes through unchanged both ways (8 MiB, not HTTP), with the client's end passed on", async () => {
  const echo = createNetServer((s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => echo.close(() => r())));
  const port = (echo.address() as AddressInfo).port;
  const lb = await TcpBalancer.start({ host: "127.0.0.1", port: 0, health: HEALTH });
  cleanups.push(() => lb.close());
  lb.setTargets([{ name: "echo", host: "127.0.0.1", port, healthUrl: `http://127.0.0.1:${port}/readyz` }]);
  const sent = randomBytes(8 * 1024 * 1024);
  const client = connect(lb.port, "127.0.0.1");
  const chunks: Buffer[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    client.on("data", (d: Buffer) => chunks.push(d));
    client.on("end", () => resolve());
    client.on("error", reject);
  });
  client.end(sent);
  await ended;
  client.destroy();
  expect(Buffer.concat(chunks).equals(sent)).toBe(true);
});
