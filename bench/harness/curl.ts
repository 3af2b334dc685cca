/**
 * curl as the client (what operators use for HTTP CONNECT), each run its own process, against
 * the HTTP front of the backend (http-backend.ts): through an HTTPS proxy with mTLS (kgw,
 * upstream's http-connect server), or straight to it (direct TCP, the relay chain).
 *
 * Figures come from curl's own timings (`-w` write-out, written to stderr, which goes to a file
 * the benchmark reads after curl exits), so curl's start-up is not counted:
 *  - time_starttransfer: from the start of the transfer (after curl parsed its options) to the
 *    first byte of the response: TCP connect to the proxy, the proxy's TLS handshake with a client
 *    certificate, CONNECT and its 200, the HTTP request through the tunnel, the backend's answer.
 *  - time_pretransfer → time_total: from the request being sent (tunnel up) to the last byte of
 *    a download, or to the backend's answer after it checked the last uploaded byte.
 * Every dial uses a new connection and a full handshake: `Connection: close`, and
 * `--no-sessionid` because kube-apiserver's Go client keeps no TLS session cache, so it never
 * resumes; a resumed handshake would skip the certificate checks that dominate a dial's cost.
 * Downloaded bytes go to a file on tmpfs and are checked there after curl exits; uploads come
 * from a file of the pattern and the backend checks them.
 */
import { closeSync, mkdtempSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { CallerFileCache } from "./caller-files.js";
import type { RunOutput } from "./output.js";
import { PatternCheck, PatternSource, randomStart } from "./pattern.js";
import type { BenchPki } from "./pki.js";
import { LOOPBACK } from "./ports.js";
import { Child } from "./procs.js";
import type { Scope } from "./scope.js";
import { now } from "./util.js";

/** tmpfs: what curl downloads is written to memory, not to a disk that would be the bottleneck. */
const DATA_ROOT = "/dev/shm";
/** Any single transfer longer than this has failed (seconds, curl's --max-time). */
const TRANSFER_MAX_S = 120;
/** How long a whole curl run may take before it is stopped (ms). */
const RUN_MAX_MS = 300_000;
/** Chunk size when checking a downloaded file against the pattern. */
const CHECK_CHUNK_BYTES = 4 * 1024 * 1024;
/** The marker of our write-out lines among curl's own error lines. */
const MARK = "KGWBENCH";
const WRITE_OUT =
  `%{stderr}${MARK} %{http_code} %{size_download} %{size_upload} ` +
  "%{time_pretransfer} %{time_starttransfer} %{time_total}\\n";

/** Where curl goes: through an HTTPS proxy (mTLS) or straight to the backend. */
export interface CurlRoute {
  /** The HTTPS proxy's port; none: plain HTTP to `port`. */
  proxyPort?: number;
  /** The port curl's HTTP request goes to (the HTTP backend, or a relay/delay in front of it). */
  port: number;
  /** The caller's credentials for the proxy. */
  pki?: BenchPki;
}

export interface CurlTiming {
  status: number;
  sizeDownload: number;
  sizeUpload: number;
  pretransferMs: number;
  starttransferMs: number;
  totalMs: number;
}

/** curl runs of one scenario: their files and credentials, removed with the scenario. */
export class CurlClient {
  private readonly dataDir: string;
  private readonly credentials: CallerFileCache;

  constructor(
    private readonly output: RunOutput,
    scope: Scope,
  ) {
    this.dataDir = mkdtempSync(path.join(DATA_ROOT, "kgw-bench-curl-"));
    this.credentials = new CallerFileCache(this.dataDir);
    scope.defer(() => rmSync(this.dataDir, { recursive: true, force: true }));
  }

  /** `count` sequential dials, each a new connection to the first byte: their time_starttransfer. */
  async dialLatencies(route: CurlRoute, count: number): Promise<number[]> {
    const t = await this.dials(route, count, 1);
    return t.timings.map((x) => x.starttransferMs);
  }

  /** `count` dials, `parallel` at a time: dials per second over curl's run, start-up included. */
  async dialRate(route: CurlRoute, count: number, parallel: number): Promise<number> {
    const t = await this.dials(route, count, parallel);
    return count / (t.wallMs / 1000);
  }

  private async dials(
    route: CurlRoute,
    count: number,
    parallel: number,
  ): Promise<{ timings: CurlTiming[]; wallMs: number }> {
    const args = [
      "-H",
      "Connection: close",
      ...(parallel > 1 ? ["--parallel", "--parallel-immediate", "--parallel-max", String(parallel)] : []),
      // One URL per dial (a glob); the query only makes them distinct.
      `http://${LOOPBACK}:${route.port}/ping?dial=[1-${count}]`,
    ];
    const r = await this.run(route, args, "/dev/null");
    if (r.timings.length !== count) throw new Error(`curl reported ${r.timings.length} of ${count} dials`);
    for (const t of r.timings) {
      if (t.status !== 200 || t.sizeDownload !== 1) {
        throw new Error(`a dial answered ${t.status} with ${t.sizeDownload} bytes, not 200 with one`);
      }
    }
    return r;
  }

  /** One download of `bytes`, every byte checked after curl exits; MB/s from request to last byte. */
  async download(route: CurlRoute, bytes: number): Promise<number> {
    const start = randomStart();
    const file = path.join(this.dataDir, "download.bin");
    try {
      const r = await this.run(
        route,
        [`http://${LOOPBACK}:${route.port}/download?n=${bytes}&start=${start}`],
        file,
      );
      const t = single(r.timings);
      if (t.status !== 200 || t.sizeDownload !== bytes) {
        throw new Error(`download answered ${t.status} with ${t.sizeDownload} of ${bytes} bytes`);
      }
      checkFile(file, bytes, start);
      return mbps(bytes, t);
    } finally {
      rmSync(file, { force: true });
    }
  }

  /** One upload of `bytes` of the pattern (PUT); MB/s from request to the backend's answer. */
  async upload(route: CurlRoute, bytes: number): Promise<number> {
    const start = randomStart();
    const file = path.join(this.dataDir, "upload.bin");
    writePatternFile(file, bytes, start);
    try {
      const url = `http://${LOOPBACK}:${route.port}/upload?n=${bytes}&start=${start}`;
      // No `Expect: 100-continue` round trip before the body: not part of moving the bytes.
      const r = await this.run(route, ["-H", "Expect:", "-T", file, url], "/dev/null");
      const t = single(r.timings);
      if (t.status !== 200 || t.sizeUpload !== bytes) {
        throw new Error(`upload answered ${t.status} after ${t.sizeUpload} of ${bytes} bytes`);
      }
      return mbps(bytes, t);
    } finally {
      rmSync(file, { force: true });
    }
  }

  private async run(
    route: CurlRoute,
    args: string[],
    outFile: string,
  ): Promise<{ timings: CurlTiming[]; wallMs: number }> {
    // --parallel prints its progress meter even with -s (curl 7.88); it is not wanted either way.
    const common = [
      "-sS",
      "--no-progress-meter",
      "--no-sessionid",
      "--max-time",
      String(TRANSFER_MAX_S),
      "-w",
      WRITE_OUT,
    ];
    const log = this.output.fileFor("curl");
    const t0 = now();
    const child = new Child(
      "curl",
      log,
      "curl",
      [...common, ...this.routeArgs(route), "-o", outFile, ...args],
      // Proxies come only from the arguments.
      { http_proxy: "", https_proxy: "", HTTP_PROXY: "", HTTPS_PROXY: "", ALL_PROXY: "", all_proxy: "" },
    );
    const timer = setTimeout(() => void child.kill(), RUN_MAX_MS);
    const exit = await child.exited.finally(() => clearTimeout(timer));
    const wallMs = now() - t0;
    const text = await readFile(log, "utf8");
    if (exit.code !== 0)
      throw new Error(`curl exited (code ${exit.code}, signal ${exit.signal}): ${text.slice(-2000)}`);
    return { timings: parseTimings(text), wallMs };
  }

  private routeArgs(route: CurlRoute): string[] {
    if (route.proxyPort === undefined) return ["--noproxy", "*"];
    if (!route.pki) throw new Error("a proxied route needs the caller's credentials");
    const { ca, cert, key } = this.credentials.filesFor(route.pki);
    return [
      "--proxytunnel",
      "--proxy",
      `https://${LOOPBACK}:${route.proxyPort}`,
      "--proxy-cacert",
      ca,
      "--proxy-cert",
      cert,
      "--proxy-key",
      key,
    ];
  }
}

/** The write-out lines' figures, wherever curl's own progress or error text put them. */
const TIMING_LINE = new RegExp(`${MARK} (\\d+) (\\d+) (\\d+) ([\\d.]+) ([\\d.]+) ([\\d.]+)\\n`, "g");

export function parseTimings(text: string): CurlTiming[] {
  return [...text.matchAll(TIMING_LINE)].map((m) => {
    const n = m.slice(1).map(Number);
    return {
      status: n[0]!,
      sizeDownload: n[1]!,
      sizeUpload: n[2]!,
      pretransferMs: n[3]! * 1000,
      starttransferMs: n[4]! * 1000,
      totalMs: n[5]! * 1000,
    };
  });
}

function single(timings: CurlTiming[]): CurlTiming {
  if (timings.length !== 1) throw new Error(`curl reported ${timings.length} transfers, not one`);
  return timings[0]!;
}

/** Bytes (10^6) per second from the request being sent to the end of the transfer. */
function mbps(bytes: number, t: CurlTiming): number {
  return bytes / 1e6 / ((t.totalMs - t.pretransferMs) / 1000);
}

/** Every byte of `file` is the pattern from `start` on, and there are exactly `bytes`. */
export function checkFile(file: string, bytes: number, start: number): void {
  const check = new PatternCheck(start);
  const buf = Buffer.allocUnsafe(CHECK_CHUNK_BYTES);
  const fd = openSync(file, "r");
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      if (!check.accept(buf.subarray(0, n)))
        throw new Error(`downloaded bytes differ from the pattern at ${check.checked}`);
    }
  } finally {
    closeSync(fd);
  }
  if (check.checked !== bytes) throw new Error(`downloaded ${check.checked} of ${bytes} bytes`);
}

function writePatternFile(file: string, bytes: number, start: number): void {
  const source = new PatternSource(start);
  const fd = openSync(file, "w", 0o600);
  try {
    for (let left = bytes; left > 0; ) {
      const chunk = source.next(Math.min(left, CHECK_CHUNK_BYTES));
      writeSync(fd, chunk);
      left -= chunk.length;
    }
  } finally {
    closeSync(fd);
  }
}
