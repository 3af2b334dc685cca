/**
 * Plumbing for the interop suite: builds the Go programs (upstream proxy-agent and proxy-server
 * from the published module, and our konnectivity-client driver), runs them as child processes
 * on loopback only, and reads what they report.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { request } from "node:http";
import { type AddressInfo, createServer, type Server, type Socket, connect as tcpConnect } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../../bench/harness/ports.js";

export const INTEROP_DIR = path.dirname(fileURLToPath(import.meta.url));
/** Git-ignored; `go build` skips relinking when a binary is up to date, GOCACHE does the rest. */
export const BIN_DIR = path.join(INTEROP_DIR, ".cache", "bin");
/** Upstream's own main packages, built unchanged (their names are upstream's: agent, server). */
export const UPSTREAM_AGENT = path.join(BIN_DIR, "agent");
export const UPSTREAM_SERVER = path.join(BIN_DIR, "server");
export const INTEROP_CLIENT = path.join(BIN_DIR, "kgw-interop-client");

const GO_PACKAGES = [
  "./cmd/kgw-interop-client",
  "sigs.k8s.io/apiserver-network-proxy/cmd/agent",
  "sigs.k8s.io/apiserver-network-proxy/cmd/server",
];

/** Versions pinned in go.mod, for test names and failure messages. */
export function pinnedVersions(): { anp: string; client: string; grpc: string } {
  const mod = readFileSync(path.join(INTEROP_DIR, "go.mod"), "utf8");
  const version = (module: string) =>
    new RegExp(`^\\s*${module.replaceAll(".", "\\.")} (v\\S+)`, "m").exec(mod)?.[1] ?? "?";
  return {
    anp: version("sigs.k8s.io/apiserver-network-proxy"),
    client: version("sigs.k8s.io/apiserver-network-proxy/konnectivity-client"),
    grpc: version("google.golang.org/grpc"),
  };
}

/**
 * One `go build` for all three programs, so shared packages compile once. Modules come from the
 * Go module proxy per go.sum (read-only: the build never edits go.mod); the toolchain is the
 * local one. Cold: about 1.5 minutes on 2 cores; warm: well under a second.
 */
export function buildGoPrograms(): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      "go",
      ["build", "-o", `${BIN_DIR}${path.sep}`, ...GO_PACKAGES],
      {
        cwd: INTEROP_DIR,
        env: {
          ...process.env,
          GOTOOLCHAIN: "local",
          GOFLAGS: "-mod=readonly -buildvcs=false",
          CGO_ENABLED: "0",
        },
        maxBuffer: 16 * 1024 * 1024,
      },
      (err, _stdout, stderr) => (err ? reject(new Error(`go build failed:\n${stderr}`)) : resolve()),
    );
  });
}

// ---------------------------------------------------------------------------------------------
// Child processes

const KEEP_LINES = 3000;

export class Proc {
  readonly child: ChildProcess;
  /** Last KEEP_LINES lines of stdout and stderr together (klog writes to stderr). */
  readonly lines: string[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly name: string,
    bin: string,
    args: string[],
  ) {
    this.child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env } });
    let partial = "";
    const onData = (d: Buffer) => {
      const text = partial + d.toString();
      const parts = text.split("\n");
      partial = parts.pop() ?? "";
      this.lines.push(...parts);
      for (const w of this.watchers) w(parts);
      if (this.lines.length > KEEP_LINES) this.lines.splice(0, this.lines.length - KEEP_LINES);
    };
    this.child.stdout!.on("data", onData);
    this.child.stderr!.on("data", onData);
    this.exited = new Promise((resolve) =>
      this.child.once("exit", (code, signal) => resolve({ code, signal })),
    );
    running.add(this);
    void this.exited.then(() => running.delete(this));
  }

  private readonly watchers = new Set<(lines: string[]) => void>();

  /** Counts output lines containing `text` from now on (unaffected by the KEEP_LINES cap). */
  countLines(text: string): { readonly count: number; stop(): void } {
    let count = 0;
    const w = (lines: string[]) => {
      for (const l of lines) if (l.includes(text)) count++;
    };
    this.watchers.add(w);
    return {
      get count() {
        return count;
      },
      stop: () => this.watchers.delete(w),
    };
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  signal(sig: NodeJS.Signals): void {
    if (this.alive) this.child.kill(sig);
  }

  /**
   * SIGTERM twice (upstream's programs drain on the first and exit on the second), then SIGKILL
   * if it is still there after `graceMs`.
   */
  async stop(graceMs = 3000): Promise<void> {
    if (!this.alive) return;
    this.child.kill("SIGTERM");
    const again = setTimeout(() => this.signal("SIGTERM"), 100);
    const kill = setTimeout(() => this.signal("SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(again);
    clearTimeout(kill);
  }

  /** The captured output, for failure messages. */
  tail(n = 40): string {
    return `--- ${this.name} (last ${n} lines) ---\n${this.lines.slice(-n).join("\n")}`;
  }
}

const running = new Set<Proc>();

/** Kill every child this suite started (each by its own pid). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop(1000)));
}

// Vitest ends its workers with SIGTERM; never leave Go processes behind.
process.once("exit", () => {
  for (const p of running) if (p.alive) p.child.kill("SIGKILL");
});

// ---------------------------------------------------------------------------------------------
// Upstream proxy-agent and proxy-server

export interface UpstreamAgentOptions {
  name: string;
  serverPort: number;
  caCert: string;
  agentId: string;
  /** mTLS */
  cert?: string;
  key?: string;
  /** Sent as `authorization: Bearer <file contents>`. */
  tokenFile?: string;
  extra?: string[];
}

export async function startUpstreamAgent(o: UpstreamAgentOptions): Promise<Proc> {
  const args = [
    "--proxy-server-host=127.0.0.1",
    `--proxy-server-port=${o.serverPort}`,
    `--ca-cert=${o.caCert}`,
    `--agent-id=${o.agentId}`,
    "--health-server-host=127.0.0.1",
    `--health-server-port=${await freePort()}`,
    "--admin-bind-address=127.0.0.1",
    `--admin-server-port=${await freePort()}`,
    "--sync-interval=100ms",
    "--sync-interval-cap=500ms",
    "--probe-interval=100ms",
    "--v=3",
  ];
  if (o.cert && o.key) args.push(`--agent-cert=${o.cert}`, `--agent-key=${o.key}`);
  if (o.tokenFile) args.push(`--service-account-token-path=${o.tokenFile}`);
  args.push(...(o.extra ?? []));
  return new Proc(o.name, UPSTREAM_AGENT, args);
}

export interface UpstreamServer {
  proc: Proc;
  agentPort: number;
  healthPort: number;
  adminPort: number;
  /** Set for a TCP frontend. */
  frontendPort?: number;
  /** Set for a Unix socket frontend. */
  uds?: string;
}

export interface UpstreamServerOptions {
  name: string;
  mode: "grpc" | "http-connect";
  serverId: string;
  serverCount: number;
  files: { caCert: string; serverCert: string; serverKey: string };
  /** Unix socket frontend; otherwise TCP with mTLS. */
  uds?: string;
  extra?: string[];
}

/**
 * Upstream proxy-server, every listener on 127.0.0.1 and every port explicit. Agents
 * authenticate with client certificates (--cluster-ca-cert), so no TokenReview is involved.
 */
export async function startUpstreamServer(o: UpstreamServerOptions): Promise<UpstreamServer> {
  const f = o.files;
  const agentPort = await freePort();
  const healthPort = await freePort();
  const adminPort = await freePort();
  const frontendPort = o.uds ? undefined : await freePort();
  const args = [
    `--mode=${o.mode}`,
    `--server-id=${o.serverId}`,
    `--server-count=${o.serverCount}`,
    ...(o.uds
      ? [`--uds-name=${o.uds}`, "--delete-existing-uds-file", "--server-port=0"]
      : [
          `--server-port=${frontendPort}`,
          "--server-bind-address=127.0.0.1",
          `--server-cert=${f.serverCert}`,
          `--server-key=${f.serverKey}`,
          `--server-ca-cert=${f.caCert}`,
        ]),
    `--agent-port=${agentPort}`,
    "--agent-bind-address=127.0.0.1",
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    `--cluster-ca-cert=${f.caCert}`,
    `--admin-port=${adminPort}`,
    "--admin-bind-address=127.0.0.1",
    `--health-port=${healthPort}`,
    "--health-bind-address=127.0.0.1",
    "--keepalive-time=30s",
    "--v=3",
    ...(o.extra ?? []),
  ];
  const proc = new Proc(o.name, UPSTREAM_SERVER, args);
  const server: UpstreamServer = { proc, agentPort, healthPort, adminPort, frontendPort, uds: o.uds };
  await waitUntil(
    async () => (await httpGet(healthPort, "/healthz")).status === 200,
    10_000,
    () => proc.tail(),
  );
  return server;
}

// ---------------------------------------------------------------------------------------------
// Small utilities

export async function waitUntil(
  cond: () => boolean | Promise<boolean>,
  timeoutMs: number,
  explain: () => string = () => "",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await cond()) return;
    } catch {
      // not yet
    }
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms\n${explain()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Plain HTTP GET on 127.0.0.1 (health and metrics endpoints). */
export function httpGet(port: number, urlPath: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, path: urlPath, agent: false, timeout: 2000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        body += c;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    req.end();
  });
}

/** The value of one Prometheus sample in exposition text, or 0 when absent. */
export function promValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) {
      total += Number(line.slice(line.lastIndexOf(" ") + 1));
    }
  }
  return total;
}

/**
 * A round-robin TCP forwarder on loopback: what a load balancer in front of several upstream
 * proxy-servers does, so an agent dialing one address reaches each of them in turn.
 */
export async function roundRobin(ports: number[]): Promise<{ port: number; close(): Promise<void> }> {
  let next = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const port = ports[next++ % ports.length]!;
    const outbound = tcpConnect(port, "127.0.0.1");
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// The konnectivity-client driver

export interface ClientResult {
  scenario: string;
  transport: string;
  target: string;
  ok: boolean;
  ms: number;
  error?: string;
  [k: string]: unknown;
}

export interface ClientRun {
  code: number | null;
  results: ClientResult[];
  stderr: string;
  /** One scenario by name; throws with the whole run when it is missing. */
  get(scenario: string): ClientResult;
}

export type ClientTarget =
  | { uds: string }
  | { addr: string; caCert: string; cert: string; key: string; serverName?: string };

export function runClient(
  transport: "grpc" | "grpc-reusable" | "connect",
  target: ClientTarget,
  scenarios: string[],
  extra: Record<string, string | number> = {},
): Promise<ClientRun> {
  const args = [`-transport=${transport}`, `-scenarios=${scenarios.join(",")}`];
  if ("uds" in target) args.push(`-uds=${target.uds}`);
  else {
    args.push(
      `-addr=${target.addr}`,
      `-ca-cert=${target.caCert}`,
      `-cert=${target.cert}`,
      `-key=${target.key}`,
    );
    if (target.serverName) args.push(`-server-name=${target.serverName}`);
  }
  for (const [k, v] of Object.entries(extra)) args.push(`-${k}=${v}`);
  return new Promise((resolve) => {
    execFile(
      INTEROP_CLIENT,
      args,
      { maxBuffer: 4 * 1024 * 1024, timeout: 120_000 },
      (err, stdout, stderr) => {
        const results = stdout
          .split("\n")
          .filter((l) => l.startsWith("{"))
          .map((l) => JSON.parse(l) as ClientResult);
        const code = err ? (typeof err.code === "number" ? err.code : null) : 0;
        // KGW_INTEROP_VERBOSE=1 prints every result line (what went over the wire, timings).
        if (process.env.KGW_INTEROP_VERBOSE) for (const r of results) console.log(JSON.stringify(r));
        resolve({
          code,
          results,
          stderr,
          get(scenario) {
            const r = results.find((x) => x.scenario === scenario);
            if (!r) throw new Error(`no result for ${scenario}: exit ${code}\n${stdout}\n${stderr}`);
            return r;
          },
        });
      },
    );
  });
}
