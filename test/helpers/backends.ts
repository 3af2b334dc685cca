/**
 * Destinations for tunneled connections: a real HTTP server with endpoints that let tests verify
 * what went through (checksums, sizes), a port with nothing listening, and a listener whose
 * connects hang (a full accept queue), for slow-dial tests.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { Readable } from "node:stream";

/** Deterministic bytes, so both ends can checksum without holding 64 MiB in memory. */
export function patternStream(total: number, seed = 1): Readable {
  const chunkSize = 64 * 1024;
  let sent = 0;
  const chunk = Buffer.alloc(chunkSize);
  for (let i = 0; i < chunkSize; i++) chunk[i] = (i * 31 + seed * 7) & 0xff;
  return new Readable({
    read() {
      if (sent >= total) {
        this.push(null);
        return;
      }
      const n = Math.min(chunkSize, total - sent);
      sent += n;
      this.push(n === chunkSize ? Buffer.from(chunk) : chunk.subarray(0, n));
    },
  });
}

export async function sha256Of(stream: Readable): Promise<{ hex: string; bytes: number }> {
  const h = createHash("sha256");
  let bytes = 0;
  for await (const c of stream) {
    h.update(c as Buffer);
    bytes += (c as Buffer).length;
  }
  return { hex: h.digest("hex"), bytes };
}

export interface HttpBackend {
  server: Server;
  address: string;
  port: number;
  close(): Promise<void>;
}

/**
 * GET /hello → "hello from the backend"; GET /bytes?n=N → N pattern bytes;
 * GET /stream?n=N → N pattern bytes without a length, so that to an HTTP/1.0 client the body
 * ends where the connection does (only the transport can tell a cut-off body from a whole one);
 * POST /sha256 → hex digest and length of the request body.
 */
export async function startHttpBackend(): Promise<HttpBackend> {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://backend");
    if (url.pathname === "/hello") {
      res.end("hello from the backend");
    } else if (url.pathname === "/bytes") {
      const n = Number(url.searchParams.get("n") ?? "0");
      res.writeHead(200, { "content-length": String(n) });
      patternStream(n).pipe(res);
    } else if (url.pathname === "/stream") {
      patternStream(Number(url.searchParams.get("n") ?? "0")).pipe(res);
    } else if (url.pathname === "/sha256" && req.method === "POST") {
      const { hex, bytes } = await sha256Of(req);
      res.end(JSON.stringify({ sha256: hex, bytes }));
    } else {
      res.writeHead(404).end();
    }
  });
  server.keepAliveTimeout = 1000;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    server,
    port,
    address: `127.0.0.1:${port}`,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/**
 * A loopback port with nothing listening on it, for a process a test starts later to bind (or for
 * a dial that must be refused). Not the kernel's pick (listen on port 0, close): that port comes
 * from the ephemeral range, so the kernel may hand it to anyone's next outgoing connection or
 * `listen(0)` before the child binds it, which a loaded CI saw as a fleet instance exiting with
 * EADDRINUSE. These come from below the ephemeral range (ip_local_port_range), where the kernel
 * never assigns a port by itself, in a band of their own per vitest worker (VITEST_POOL_ID), so
 * two suites running at once never pick the same one; each is checked free by binding it.
 */
export async function closedPort(): Promise<number> {
  const { first, size } = portBand();
  for (let tries = 0; tries < size; tries++) {
    const port = first + (nextInBand++ % size);
    if (await bindable(port)) return port;
  }
  throw new Error(`closedPort: no free loopback port in ${first}-${first + size - 1}`);
}

/** The lowest port of the system's ephemeral range (the kernel's own picks start there). */
function ephemeralLow(): number {
  try {
    const low = Number.parseInt(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8"), 10);
    return Number.isInteger(low) && low > PORT_FLOOR + BAND_SIZE ? low : 32_768;
  } catch {
    return 32_768;
  }
}

/** Ports below this are left alone: well-known services and the range people configure by hand. */
const PORT_FLOOR = 10_000;
const BAND_SIZE = 400;

function portBand(): { first: number; size: number } {
  const bands = Math.floor((ephemeralLow() - PORT_FLOOR) / BAND_SIZE);
  const worker = Number.parseInt(process.env.VITEST_POOL_ID ?? "", 10);
  const band = (Number.isInteger(worker) ? worker : process.pid) % bands;
  return { first: PORT_FLOOR + band * BAND_SIZE, size: BAND_SIZE };
}

/** Where this module's next pick starts: spread per process, so a worker's next file starts elsewhere. */
let nextInBand = (process.pid * 37) % BAND_SIZE;

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createNetServer();
    s.once("error", () => resolve(false));
    s.listen({ port, host: "127.0.0.1", exclusive: true }, () => s.close(() => resolve(true)));
  });
}

/**
 * A listener that never accepts and whose queue is already full, so a new connect to it hangs
 * (Linux drops the SYN) until the dialer gives up. Node cannot listen without accepting, so a
 * tiny python3 process holds the socket.
 */
export async function hangingListener(): Promise<{ port: number; close(): void }> {
  const script = [
    "import socket, sys, time",
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)",
    "fill = []",
    "for _ in range(3):",
    "    c = socket.socket(); c.setblocking(False)",
    "    try: c.connect(s.getsockname())",
    "    except BlockingIOError: pass",
    "    fill.append(c)",
    "time.sleep(0.2)",
    "print(s.getsockname()[1], flush=True)",
    "sys.stdin.read()",
  ].join("\n");
  const child: ChildProcess = spawn("python3", ["-c", script], { stdio: ["pipe", "pipe", "inherit"] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once("error", reject);
  });
  return { port, close: () => child.stdin!.end() };
}
