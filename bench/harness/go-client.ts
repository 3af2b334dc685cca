/**
 * The Go konnectivity-client as the gRPC client (what kube-apiserver links): the benchmark's Go
 * command test/interop/cmd/kgw-bench-client, its own process per measurement, a single-use tunnel
 * (its own mTLS connection) per dial as kube-apiserver opens them, the backend's protocol
 * through it, every byte checked. It times itself (Go's start-up is not counted) and writes its
 * figures as JSON to a file the benchmark reads after it exits; its stderr goes to its log file.
 * Built once per run with the module versions pinned in test/interop/go.mod (the Go module proxy
 * per go.sum), into node_modules/.cache/kgw-bench/bin like the upstream binaries.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { CallerFileCache } from "./caller-files.js";
import type { RunOutput } from "./output.js";
import { randomStart } from "./pattern.js";
import type { BenchPki } from "./pki.js";
import { LOOPBACK } from "./ports.js";
import { Child } from "./procs.js";
import type { Scope } from "./scope.js";
import { INTEROP_DIR, OWN_BIN, run } from "./upstream.js";

const PACKAGE = "./cmd/kgw-bench-client";
export const GO_CLIENT_BIN = path.join(OWN_BIN, "kgw-bench-client");
/** A cold build compiles grpc-go and the konnectivity-client: minutes. */
const BUILD_MAX_MS = 15 * 60_000;
/** How long one client run may take before it is stopped (ms). */
const RUN_MAX_MS = 300_000;

let built: Promise<string> | undefined;

/** Builds the client once per benchmark run; resolves to the binary. */
export function goClientBinary(log: (m: string) => void): Promise<string> {
  built ??= (async () => {
    log("building the Go bench client (test/interop/cmd/kgw-bench-client)");
    await run("go", ["build", "-o", `${OWN_BIN}${path.sep}`, PACKAGE], INTEROP_DIR, BUILD_MAX_MS);
    return GO_CLIENT_BIN;
  })();
  return built;
}

/** Where the client goes: a gRPC frontend, with the caller's credentials, to the backend. */
export interface GoRoute {
  port: number;
  pki: BenchPki;
  target: string;
}

/** Runs of the Go client in one scenario; their credential files are removed with it. */
export class GoClient {
  private readonly dir: string;
  private readonly credentials: CallerFileCache;
  private runs = 0;

  constructor(
    private readonly bin: string,
    private readonly output: RunOutput,
    scope: Scope,
  ) {
    this.dir = mkdtempSync(path.join(tmpdir(), "kgw-bench-go-"));
    this.credentials = new CallerFileCache(this.dir);
    scope.defer(() => rmSync(this.dir, { recursive: true, force: true }));
  }

  /** `count` sequential single-use-tunnel dials to the first byte, in ms. */
  async dialLatencies(route: GoRoute, count: number): Promise<number[]> {
    const r = await this.run<{ dialMs: number[] }>(route, ["-mode=latency", `-count=${count}`]);
    if (r.dialMs.length !== count)
      throw new Error(`the Go client reported ${r.dialMs.length} of ${count} dials`);
    return r.dialMs;
  }

  /** `count` dials, `concurrency` at a time: dials per second, timed by the client. */
  async dialRate(route: GoRoute, count: number, concurrency: number): Promise<number> {
    const r = await this.run<{ dials: number; seconds: number }>(route, [
      "-mode=rate",
      `-count=${count}`,
      `-concurrency=${concurrency}`,
    ]);
    return r.dials / r.seconds;
  }

  /**
   * One transfer of `bytes`, every byte checked: MB/s from the command to the last byte (ack).
   * `chunkBytes`: bytes per write of an upload (each a DATA packet; the client's 256 KiB by
   * default) and per read of a download.
   */
  async transfer(
    route: GoRoute,
    dir: "download" | "upload",
    bytes: number,
    chunkBytes?: number,
  ): Promise<number> {
    const r = await this.run<{ bytes: number; seconds: number }>(route, [
      `-mode=${dir}`,
      `-bytes=${bytes}`,
      `-start=${randomStart()}`,
      ...(chunkBytes === undefined ? [] : [`-chunk=${chunkBytes}`]),
    ]);
    if (r.bytes !== bytes) throw new Error(`the Go client moved ${r.bytes} of ${bytes} bytes`);
    return r.bytes / 1e6 / r.seconds;
  }

  private async run<T>(route: GoRoute, args: string[]): Promise<T> {
    const { ca, cert, key } = this.credentials.filesFor(route.pki);
    const out = path.join(this.dir, `result-${++this.runs}.json`);
    const log = this.output.fileFor("go-client");
    const child = new Child("go-client", log, this.bin, [
      `-addr=${LOOPBACK}:${route.port}`,
      `-ca-cert=${ca}`,
      `-cert=${cert}`,
      `-key=${key}`,
      `-target=${route.target}`,
      `-out=${out}`,
      ...args,
    ]);
    const timer = setTimeout(() => void child.kill(), RUN_MAX_MS);
    const exit = await child.exited.finally(() => clearTimeout(timer));
    if (exit.code !== 0) {
      const text = await readFile(log, "utf8");
      throw new Error(
        `the Go client exited (code ${exit.code}, signal ${exit.signal}): ${text.slice(-2000)}`,
      );
    }
    try {
      return JSON.parse(await readFile(out, "utf8")) as T;
    } finally {
      rmSync(out, { force: true });
    }
  }
}
