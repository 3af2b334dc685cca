/**
 * A local fleet for tests: real `kgw server` processes (spawned as operators run them) sharing
 * one DynamoDB table, each on fixed loopback ports so that a restart comes back where it was;
 * tenants made with `kgw tenant --table`; a tiny TCP front that plays the load balancer; and
 * tenant-specific backends, so that a dial reaching the wrong tenant's agent shows.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs";
import { createServer, get as httpGet, type Server } from "node:http";
import {
  type AddressInfo,
  createServer as createNetServer,
  connect as netConnect,
  type Socket,
} from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import { splice } from "../../lib/demo/tcp-splice.js";
import { closedPort, patternStream, sha256Of } from "./backends.js";
import { bodyText, httpOver } from "./connect-client.js";
import { connectOnGatewayPort } from "./gateway-connect.js";
import { type KgwProcess, spawnKgw } from "./kgw-process.js";
import type { TestPki } from "./pki.js";

const ENTRY = fileURLToPath(new URL("./kgw-entry.ts", import.meta.url));

export interface FleetPorts {
  agent: number;
  admin: number;
  health: number;
  peer: number;
}

/** One `kgw server` of the fleet; its ports stay the same across restarts. */
export class FleetInstance {
  child: ChildProcess | null = null;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> = Promise.resolve({
    code: null,
    signal: null,
  });

  constructor(
    readonly id: string,
    readonly ports: FleetPorts,
    private readonly args: string[],
    private readonly env: Record<string, string>,
    readonly logFile: string,
  ) {}

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Spawns the process (output appended to logFile) and waits until /readyz says ready. */
  async start(timeoutMs = 20_000): Promise<void> {
    const fd = openSync(this.logFile, "a");
    const child = spawn(process.execPath, ["--import", "tsx", ENTRY, ...this.args], {
      env: { ...process.env, ...this.env },
      stdio: ["ignore", fd, fd],
    });
    closeSync(fd);
    this.child = child;
    this.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    await waitUntil(
      async () => {
        if (child.exitCode !== null) {
          const tail = this.log().trim().split("\n").slice(-5).join("\n");
          throw new Error(`${this.id} exited with ${child.exitCode}; its log ends:\n${tail}`);
        }
        return (await this.readyz()) === 200;
      },
      timeoutMs,
      `${this.id} ready`,
    );
  }

  /** /readyz on the health port: the status, or 0 when nothing answers. */
  readyz(): Promise<number> {
    return httpStatus(this.ports.health, "/readyz");
  }

  /** The admin port's /readyz?verbose as JSON, or null when it does not answer. */
  async verbose(): Promise<Record<string, unknown> | null> {
    try {
      return JSON.parse(await httpText(this.ports.admin, "/readyz?verbose")) as Record<string, unknown>;
    } catch {
      return null;
    }
  }

  /** Agents of `tenant` answering here, from the admin port's /readyz?tenant=. */
  async agentsOf(tenant: string): Promise<string> {
    return httpText(this.ports.admin, `/readyz?tenant=${tenant}`).catch(() => "");
  }

  metrics(): Promise<string> {
    return httpText(this.ports.admin, "/metrics");
  }

  kill9(): Promise<unknown> {
    this.child?.kill("SIGKILL");
    return this.exited;
  }

  /** SIGTERM, and the exit it leads to. */
  async terminate(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.child?.kill("SIGTERM");
    return this.exited;
  }

  log(): string {
    try {
      return readFileSync(this.logFile, "utf8");
    } catch {
      return "";
    }
  }
}

export interface FleetSetup {
  pki: TestPki;
  peerFiles: { peerCert: string; peerKey: string };
  table: string;
  dynamoEnv: Readonly<Record<string, string>>;
  /** Extra flags for every instance. */
  flags?: string[];
}

/** `n` instances, configured (not started): fixed loopback ports, short lease timings. */
export async function makeFleet(setup: FleetSetup, n: number, logDir: string): Promise<FleetInstance[]> {
  const { pki } = setup;
  const f = pki.files;
  const instances: FleetInstance[] = [];
  for (let i = 1; i <= n; i++) {
    const ports: FleetPorts = {
      agent: await closedPort(),
      admin: await closedPort(),
      health: await closedPort(),
      peer: await closedPort(),
    };
    const id = `fleet-${i}`;
    const args = [
      "server",
      `--server-id=${id}`,
      `--registry-table=${setup.table}`,
      `--tenant-ca-cert=${f.caCert}`,
      `--agent-port=${ports.agent}`,
      "--agent-bind-address=127.0.0.1",
      `--cluster-cert=${f.serverCert}`,
      `--cluster-key=${f.serverKey}`,
      `--admin-port=${ports.admin}`,
      "--admin-bind-address=127.0.0.1",
      `--health-port=${ports.health}`,
      "--health-bind-address=127.0.0.1",
      `--peer-port=${ports.peer}`,
      "--peer-bind-address=127.0.0.1",
      `--peer-cert=${setup.peerFiles.peerCert}`,
      `--peer-key=${setup.peerFiles.peerKey}`,
      `--peer-ca-cert=${f.caCert}`,
      `--peer-advertise-address=127.0.0.1:${ports.peer}`,
      "--lease-heartbeat=300ms",
      "--lease-duration=2s",
      "--tenant-watch-interval=1s",
      "--graceful-shutdown-timeout=3s",
      "--log-level=info",
      ...(setup.flags ?? []),
    ];
    instances.push(
      new FleetInstance(id, ports, args, { ...setup.dynamoEnv }, path.join(logDir, `${id}.log`)),
    );
  }
  return instances;
}

export interface CreatedFleetTenant {
  id: string;
  agentToken: string;
  callerToken: string;
}

/**
 * `kgw tenant create --table` in this process (the SDK reads its endpoint from process.env, which
 * the caller points at the local DynamoDB).
 */
export async function createTableTenant(pki: TestPki, table: string, id: string, outDir: string) {
  const env = {
    KGW_CA_CERT: pki.files.caCert,
    KGW_CA_KEY: pki.files.caKey,
    KGW_GATEWAY_ADDRESS: "127.0.0.1:8132",
  };
  const parsed = parseTenantCommand(
    [
      "create",
      id,
      `--table=${table}`,
      "--caller-token",
      "--allow-loopback",
      `--out=${path.join(outDir, `bundle-${id}`)}`,
      "--output=json",
    ],
    env,
  );
  if (parsed.help) throw new Error("unexpected help");
  let out = "";
  let err = "";
  const code = await runTenantCommand(parsed.command, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
  });
  if (code !== 0) throw new Error(`kgw tenant create ${id} exited ${code}: ${err}`);
  const result = JSON.parse(out) as { agentToken: string; callerToken: string };
  return { id, agentToken: result.agentToken, callerToken: result.callerToken } satisfies CreatedFleetTenant;
}

/** A tenant's backend: GET /whoami → the tenant's id; GET /bytes?n=N → N pattern bytes. */
export interface TenantBackend {
  tenant: string;
  port: number;
  close(): Promise<void>;
}

export async function startTenantBackend(tenant: string): Promise<TenantBackend> {
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://backend");
    if (url.pathname === "/whoami") res.end(tenant);
    else if (url.pathname === "/bytes") {
      const n = Number(url.searchParams.get("n") ?? "0");
      res.writeHead(200, { "content-length": String(n) });
      patternStream(n).pipe(res);
    } else res.writeHead(404).end();
  });
  // Long: a test keeps one connection open and asks over it now and then (a live tunnel).
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    tenant,
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * One dial as a kube-apiserver's would be: CONNECT with the tenant's caller token through the
 * gateway port `port` to `target`, then GET /whoami over the tunnel. Resolves with the body;
 * rejects with the status (and error code) of a refused CONNECT or the socket's error.
 */
export async function dialWhoami(pki: TestPki, port: number, token: string, target: string): Promise<string> {
  const res = await connectOnGatewayPort(pki, port, { token }, target);
  if (res.status !== 200) {
    res.socket.destroy();
    throw new Error(`CONNECT answered ${res.status} ${res.code ?? ""}`);
  }
  try {
    const answer = await httpOver(res.socket, "/whoami");
    return await bodyText(answer);
  } finally {
    res.socket.destroy();
  }
}

/**
 * A tunnel kept open: CONNECT once, then `ask()` sends GET /whoami over the same connection
 * (HTTP/1.1 keep-alive) and resolves with the body. Fails if the tunnel breaks.
 */
export async function openTunnel(pki: TestPki, port: number, token: string, target: string) {
  const res = await connectOnGatewayPort(pki, port, { token }, target);
  if (res.status !== 200) throw new Error(`CONNECT answered ${res.status} ${res.code ?? ""}`);
  const socket = res.socket;
  let closed: string | null = null;
  socket.on("close", () => {
    closed ??= "the tunnel closed";
  });
  socket.on("error", (err) => {
    closed = `the tunnel failed: ${err.message}`;
  });
  return {
    ask(timeoutMs = 3000): Promise<string> {
      return new Promise((resolve, reject) => {
        if (closed) return reject(new Error(closed));
        let buf = "";
        const timer = setTimeout(() => finish(new Error(`no answer within ${timeoutMs}ms`)), timeoutMs);
        const onData = (d: Buffer) => {
          buf += d.toString();
          const head = buf.indexOf("\r\n\r\n");
          const length = /content-length: (\d+)/i.exec(buf);
          if (head >= 0 && length && buf.length >= head + 4 + Number(length[1])) {
            finish(null, buf.slice(head + 4, head + 4 + Number(length[1])));
          }
        };
        const onClose = () => finish(new Error(closed ?? "the tunnel closed"));
        const finish = (err: Error | null, body?: string) => {
          clearTimeout(timer);
          socket.off("data", onData);
          socket.off("close", onClose);
          if (err) reject(err);
          else resolve(body!);
        };
        socket.on("data", onData);
        socket.once("close", onClose);
        socket.write("GET /whoami HTTP/1.1\r\nHost: backend\r\n\r\n");
      });
    },
    close: () => socket.destroy(),
  };
}

/** Downloads `bytes` pattern bytes through a tunnel; resolves with their SHA-256 and length. */
export async function downloadSha(
  pki: TestPki,
  port: number,
  token: string,
  target: string,
  bytes: number,
): Promise<{ hex: string; bytes: number }> {
  const res = await connectOnGatewayPort(pki, port, { token }, target);
  if (res.status !== 200) throw new Error(`CONNECT answered ${res.status} ${res.code ?? ""}`);
  try {
    const answer = await httpOver(res.socket, `/bytes?n=${bytes}`);
    return await sha256Of(answer);
  } finally {
    res.socket.destroy();
  }
}

/** SHA-256 of `bytes` pattern bytes, as the backend sends them. */
export function expectedSha(bytes: number): Promise<{ hex: string; bytes: number }> {
  return sha256Of(patternStream(bytes));
}

/**
 * A TCP front that plays the load balancer: each new connection goes to the next target (or,
 * "sticky", the first one) that accepts it; targets refusing the connection are skipped. Joined
 * as the NLB joins them (lib/demo/tcp-splice.ts): half-open both ways, a reset passed on as a
 * reset. A front that closed the target's side when the client's ended cut an agent's orderly end
 * while the target was still reading (tests of drains then failed under load).
 */
export interface TcpFront {
  port: number;
  /** Connections currently proxied. */
  readonly open: number;
  /** Client connections whose end (FIN) the front has read. */
  readonly clientEnds: number;
  close(): Promise<void>;
}

export async function startTcpFront(
  targets: () => number[],
  mode: "round-robin" | "sticky" = "round-robin",
): Promise<TcpFront> {
  let next = 0;
  let clientEnds = 0;
  const sockets = new Set<Socket>();
  const server = createNetServer({ allowHalfOpen: true }, (client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.once("end", () => clientEnds++);
    client.on("error", () => {});
    client.pause();
    const list = targets();
    const start = mode === "sticky" ? 0 : next++ % Math.max(1, list.length);
    const tryAt = (k: number) => {
      if (k >= list.length || client.destroyed) {
        client.destroy();
        return;
      }
      const upstream = netConnect({
        host: "127.0.0.1",
        port: list[(start + k) % list.length]!,
        allowHalfOpen: true,
      });
      sockets.add(upstream);
      upstream.on("close", () => sockets.delete(upstream));
      let connected = false;
      upstream.once("connect", () => {
        connected = true;
        upstream.setNoDelay(true);
        client.setNoDelay(true);
        splice(client, upstream);
        client.resume();
      });
      upstream.on("error", () => {
        // Once connected, "close" follows and splice passes the reset on.
        if (!connected) tryAt(k + 1);
      });
    };
    tryAt(0);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    get open() {
      return sockets.size;
    },
    get clientEnds() {
      return clientEnds;
    },
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

export function tempDir(prefix: string): { dir: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Polls `cond` every 25 ms until it holds; a throw from `cond` fails at once. */
export async function waitUntil(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function httpStatus(port: number, pathname: string): Promise<number> {
  return new Promise((resolve) => {
    const req = httpGet({ host: "127.0.0.1", port, path: pathname, agent: false, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
  });
}

function httpText(port: number, pathname: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpGet({ host: "127.0.0.1", port, path: pathname, agent: false, timeout: 2000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve(body));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
  });
}

/**
 * A kgw agent process for a fleet test, dialling the fleet through `port` (a TcpFront, as agents
 * reach a real fleet through its load balancer), re-syncing every 100 ms (capped at 500 ms) so a
 * move to another instance shows within a test's patience.
 */
export function spawnFleetAgent(pki: TestPki, port: number, agentToken: string, agentId: string): KgwProcess {
  return spawnKgw([
    "agent",
    "--proxy-server-host=127.0.0.1",
    `--proxy-server-port=${port}`,
    "--server-name=localhost",
    `--ca-cert=${pki.files.caCert}`,
    `--agent-token=${agentToken}`,
    `--agent-id=${agentId}`,
    "--health-server-host=127.0.0.1",
    "--health-server-port=0",
    "--admin-server-port=0",
    "--sync-interval=100ms",
    "--sync-interval-cap=500ms",
    "--log-level=warn",
  ]);
}
