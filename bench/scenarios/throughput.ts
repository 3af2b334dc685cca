/**
 * Bulk throughput of one tunneled connection, download and upload, through the gRPC frontend and
 * through HTTP CONNECT, against direct TCP, the plain two-hop relay and upstream, and with
 * --tenant-mode kgw in tenant mode (the loopback case only: the question is what the identity
 * checks cost, which a 20 ms round trip would only hide). With a delay,
 * the delay proxy sits between agent and server (between the two relays; between client and
 * backend for direct TCP): the WAN case.
 */

import { GoClient } from "../harness/go-client.js";
import { connectOpener, grpcOwnChannelOpener, type Opener, tcpOpener } from "../harness/paths.js";
import type { Child } from "../harness/procs.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { startBackend, startDelay, startKgw, startRelayChain } from "../harness/stacks.js";
import { median } from "../harness/stats.js";
import { bulk, type Direction, pingRoundTrips } from "../harness/transfer.js";
import type { BenchContext, Cell, Row, Scenario, System, Target } from "../harness/types.js";
import { Samples, startTenantIfAsked, startUpstreams, tenantCell, upstreamCell } from "./common.js";
import { CURL_MAX_BULK_BYTES, startCurlPaths } from "./curl-paths.js";
import { GO_BASELINE_NA, goCell, startGoPaths } from "./go-paths.js";

const DIRECTIONS: Direction[] = ["download", "upload"];
const MODES = [
  { mode: "grpc", label: "gRPC frontend" },
  { mode: "connect", label: "HTTP CONNECT" },
] as const;
/** The paths whose PING round trip on an open tunnel is reported. */
const ECHO_PATHS = ["direct", "relay", "kgw-connect", "tenant-connect", "up-connect"];
/** Warm-up before measuring (JIT, TLS session setup, socket buffers growing). */
const WARMUP_BYTES = 32 * 1024 * 1024;
/**
 * The Go client's writes in the extra upload row: what kube-apiserver's proxying writes into a
 * tunnel (io.Copy's 32 KiB buffer), each a DATA packet, where the main rows write 256 KiB.
 */
const KUBE_WRITE_BYTES = 32 * 1024;

export interface ThroughputOptions {
  name: string;
  title: string;
  description: string;
  delayMsEachWay?: number;
  targets: Target[];
  /** Measure kgw in tenant mode too, when the run asks for it (--tenant-mode). */
  tenantMode?: boolean;
}

export function throughputScenario(o: ThroughputOptions): Scenario {
  return {
    name: o.name,
    title: o.title,
    description: o.description,
    run: (ctx) => run(ctx, o),
  };
}

async function run(ctx: BenchContext, o: ThroughputOptions): Promise<Row[]> {
  const { sizes } = ctx;
  const d = o.delayMsEachWay;
  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const [directPort, relay, kgw, tenant, up] = await Promise.all([
    d === undefined ? backend.port : startDelay(ctx, backend.port, d).then((e) => e.port),
    startRelayChain(ctx, backend.port, d),
    startKgw(ctx, { delayMsEachWay: d }),
    o.tenantMode ? startTenantIfAsked(ctx, { delayMsEachWay: d }) : null,
    startUpstreams(ctx, ["grpc", "connect"], { delayMsEachWay: d }),
  ]);

  const paths: Record<string, Opener> = {
    direct: tcpOpener(directPort),
    relay: tcpOpener(relay.port),
    "kgw-grpc": grpcOwnChannelOpener(ctx.pki, kgw.frontendPort, target),
    "kgw-connect": connectOpener(ctx.pki, kgw.frontendPort, target),
  };
  /** The processes in the middle of each path, whose CPU time per MB is reported. */
  const middle: Record<string, Child[]> = {
    direct: [],
    relay: [relay.first, relay.second],
    "kgw-grpc": [kgw.server, kgw.agent!],
    "kgw-connect": [kgw.server, kgw.agent!],
  };
  if (tenant && !(tenant instanceof Error)) {
    const { stack, callers } = tenant;
    paths["tenant-grpc"] = grpcOwnChannelOpener(callers, stack.frontendPort, target);
    paths["tenant-connect"] = connectOpener(callers, stack.frontendPort, target);
    middle["tenant-grpc"] = [stack.server, stack.agent!];
    middle["tenant-connect"] = [stack.server, stack.agent!];
  }
  const upGrpc = up.grpc;
  const upConnect = up.connect;
  if (upGrpc && !(upGrpc instanceof Error)) {
    paths["up-grpc"] = grpcOwnChannelOpener(ctx.pki, upGrpc.frontendPort, target);
    middle["up-grpc"] = [upGrpc.server, upGrpc.agent!];
  }
  if (upConnect && !(upConnect instanceof Error)) {
    paths["up-connect"] = connectOpener(ctx.pki, upConnect.frontendPort, target);
    middle["up-connect"] = [upConnect.server, upConnect.agent!];
  }

  const curl = await startCurlPaths(ctx, { kgw, tenant, upConnect, delayMsEachWay: d });
  const curlBytes = Math.min(sizes.bulkBytes, CURL_MAX_BULK_BYTES);
  const curlMove = (name: string, dir: Direction, bytes: number) => {
    const route = curl.routes[name]!;
    return dir === "download" ? curl.client.download(route, bytes) : curl.client.upload(route, bytes);
  };

  const go = await startGoPaths(ctx, { kgw, tenant, upGrpc, target });
  const goClient = go.client instanceof GoClient ? go.client : null;
  /** The Go client's transfers, in writes of `chunkBytes` (the client's own 256 KiB by default). */
  const goMove = (chunkBytes?: number) => (name: string, dir: Direction, bytes: number) =>
    goClient!.transfer(go.routes[name]!, dir, bytes, chunkBytes);
  /** The clients of their own processes, each with its paths and directions: [key prefix, path names, directions, move]. */
  const external: [string, string[], Direction[], typeof curlMove][] = [
    ["curl", Object.keys(curl.routes), DIRECTIONS, curlMove],
    ...(goClient
      ? ([
          ["go", Object.keys(go.routes), DIRECTIONS, goMove()],
          ["go32k", Object.keys(go.routes), ["upload"], goMove(KUBE_WRITE_BYTES)],
        ] as [string, string[], Direction[], typeof curlMove][])
      : []),
  ];

  /** --transfers: only the transfers whose key matches are measured (warm-ups included). */
  const chosen = (key: string) => ctx.options.transfers?.test(key) ?? true;
  const s = new Samples(ctx);
  const warmBytes = Math.min(WARMUP_BYTES, sizes.bulkBytes);
  const warmMs = sizes.warmupMs;
  for (const [name, open] of Object.entries(paths)) {
    for (const dir of DIRECTIONS) {
      if (!chosen(`${name}-${dir}`)) continue;
      await s.take(`${name}-${dir}`, async () => {
        await bulk(open, dir, warmBytes, warmMs);
        return Number.NaN;
      });
    }
  }
  for (const [prefix, names, dirs, move] of external) {
    for (const name of names) {
      for (const dir of dirs) {
        if (!chosen(`${prefix}-${name}-${dir}`)) continue;
        await s.take(`${prefix}-${name}-${dir}`, async () => {
          await move(name, dir, warmBytes);
          return Number.NaN;
        });
      }
    }
  }
  // Every path in every round, the order reversed every other round; ratios are per round.
  const measured = new Samples(ctx);
  const cpu = new Samples(ctx);
  const echo = new Samples(ctx);
  const pairs = Object.keys(paths)
    .flatMap((name) => DIRECTIONS.map((dir) => ({ name, dir })))
    .filter(({ name, dir }) => chosen(`${name}-${dir}`));
  const externalPairs = external
    .flatMap(([prefix, names, dirs, move]) =>
      names.flatMap((name) => dirs.map((dir) => ({ prefix, name, dir, move }))),
    )
    .filter(({ prefix, name, dir }) => chosen(`${prefix}-${name}-${dir}`));
  await eachRound(ctx, async (round) => {
    for (const { prefix, name, dir, move } of roundOrder(externalPairs, round)) {
      const key = `${prefix}-${name}-${dir}`;
      if (s.failed(key)) {
        if (!measured.failed(key)) measured.fail(key, new Error("failed during warm-up"));
        continue;
      }
      ctx.log(`    ${prefix} ${dir} ${name}`);
      await measured.take(key, () => move(name, dir, curlBytes));
    }
    for (const { name, dir } of roundOrder(pairs, round)) {
      const key = `${name}-${dir}`;
      if (s.failed(key)) {
        if (!measured.failed(key)) measured.fail(key, new Error("failed during warm-up"));
        continue;
      }
      const procs = middle[name] ?? [];
      const before = procs.map((p) => p.cpuSeconds());
      await measured.take(key, async () => {
        const t = await bulk(paths[name]!, dir, sizes.bulkBytes, sizes.bulkMaxMs);
        const used = procs.map((p, i) => p.cpuSeconds() - before[i]!);
        const perMb = (seconds: number) => (seconds * 1e6) / (t.bytes / 1e6);
        if (procs.length > 0 && t.bytes > 0) {
          await cpu.take(key, async () => perMb(used.reduce((a, b) => a + b, 0)));
          for (const [i, u] of used.entries()) await cpu.take(`${key}#${i}`, async () => perMb(u));
        }
        return t.mbps;
      });
    }
    // --transfers measures transfers only.
    for (const name of ctx.options.transfers ? [] : roundOrder(ECHO_PATHS, round)) {
      const open = paths[name];
      if (open) await echo.take(name, async () => median(await pingRoundTrips(open, sizes.pings)));
    }
  });

  const rows: Row[] = [];
  for (const dir of DIRECTIONS) {
    rows.push({
      name: `${dir}, HTTP CONNECT (curl)`,
      unit: "MB/s",
      better: "higher",
      targets: o.targets,
      cells: {
        kgw: measured.cell(`curl-kgw-${dir}`),
        ...tenantCell(tenant, () => measured.cell(`curl-tenant-${dir}`)),
        direct: measured.cell(`curl-direct-${dir}`),
        relay: measured.cell(`curl-relay-${dir}`),
        upstream: upstreamCell(ctx, up.connect, () => measured.cell(`curl-up-${dir}`)),
      },
    });
  }
  /** A row of the Go client's transfers, keyed `<prefix>-<path>-<dir>`. */
  const goRow = (name: string, prefix: string, dir: Direction): Row => {
    const m = (key: string) => () => goCell(go, () => measured.cell(`${prefix}-${key}-${dir}`));
    return {
      name,
      unit: "MB/s",
      better: "higher",
      targets: o.targets,
      cells: {
        kgw: m("kgw")(),
        ...tenantCell(tenant, m("tenant")),
        direct: GO_BASELINE_NA,
        relay: GO_BASELINE_NA,
        upstream: upstreamCell(ctx, up.grpc, m("up")),
      },
    };
  };
  for (const dir of DIRECTIONS) {
    rows.push(goRow(`${dir}, gRPC (Go konnectivity-client, single-use tunnel)`, "go", dir));
  }
  rows.push(
    goRow(
      "upload, gRPC (Go konnectivity-client, single-use tunnel), 32 KiB writes as kube-apiserver's",
      "go32k",
      "upload",
    ),
  );
  for (const { mode, label } of MODES) {
    for (const dir of DIRECTIONS) {
      rows.push({
        name: `${dir}, ${label}`,
        unit: "MB/s",
        better: "higher",
        targets: o.targets,
        cells: {
          kgw: measured.cell(`kgw-${mode}-${dir}`),
          ...tenantCell(tenant, () => measured.cell(`tenant-${mode}-${dir}`)),
          direct: measured.cell(`direct-${dir}`),
          relay: measured.cell(`relay-${dir}`),
          upstream: upstreamCell(ctx, up[mode], () => measured.cell(`up-${mode}-${dir}`)),
        },
      });
    }
  }
  for (const { mode, label } of MODES) {
    for (const dir of DIRECTIONS) {
      rows.push({
        name: `CPU time per MB moved, server + agent, ${dir}, ${label}`,
        unit: "µs/MB",
        better: "lower",
        targets: [{ kind: "upstream" }],
        cells: {
          kgw: cpuCell(cpu, `kgw-${mode}-${dir}`, ["server", "agent"]),
          ...tenantCell(tenant, () => cpuCell(cpu, `tenant-${mode}-${dir}`, ["server", "agent"])),
          direct: { na: "no process in the middle" },
          relay: cpuCell(cpu, `relay-${dir}`, ["relay 1", "relay 2"]),
          upstream: upstreamCell(ctx, up[mode], () => cpuCell(cpu, `up-${mode}-${dir}`, ["server", "agent"])),
        },
      });
    }
  }
  rows.push({
    name: "PING round trip on an open tunnel, HTTP CONNECT (p50)",
    unit: "ms",
    better: "lower",
    targets: [{ kind: "upstream" }],
    cells: {
      kgw: echo.cell("kgw-connect"),
      ...tenantCell(tenant, () => echo.cell("tenant-connect")),
      direct: echo.cell("direct"),
      relay: echo.cell("relay"),
      upstream: upstreamCell(ctx, up.connect, () => echo.cell("up-connect")),
    },
  });
  // --transfers: the rows of transfers left out are not measured on purpose, not failures.
  if (ctx.options.transfers) {
    for (const row of rows) {
      for (const k of Object.keys(row.cells) as System[]) {
        if (row.cells[k]?.error === "not measured") row.cells[k] = { na: "not measured (--transfers)" };
      }
    }
  }
  return rows;
}

/** The sum, with each process's median share in the note. */
function cpuCell(cpu: Samples, key: string, names: [string, string]): Cell {
  const sum = cpu.cell(key);
  if (sum.value === undefined) return sum;
  const share = (i: number) =>
    Math.round(cpu.cell(`${key}#${i}`).value ?? Number.NaN).toLocaleString("en-US");
  return { ...sum, note: names.map((n, i) => `${n} ${share(i)}`).join(" + ") };
}

export const throughput = throughputScenario({
  name: "throughput",
  title: "Bulk throughput of one tunneled connection, loopback",
  description:
    "One connection moves up to the bulk size (or for at most the sample time) from the backend " +
    "(download) or to it (upload); the figure is bytes over time to the last byte (upload: to the " +
    "backend's last acknowledgement), every byte checked, median over rounds. CPU time per MB: " +
    "user + system time of the two processes in the middle (server and agent, or the two relays) during a sample, over the " +
    "bytes moved: a figure other load on the machine barely changes. gRPC: one TunnelClient channel per " +
    "connection; CONNECT: one mTLS connection per tunnel. Also the round trip of a 9-byte PING and " +
    "its 1-byte answer on an open tunnel.",
  targets: [{ kind: "ratioToRelay", min: 0.5 }, { kind: "upstream" }],
  tenantMode: true,
});

export const wan = throughputScenario({
  name: "wan",
  title: "Bulk throughput of one tunneled connection, 20 ms RTT between agent and server",
  description:
    "As `throughput`, with the delay proxy adding 10 ms each way between agent and server " +
    "(between the two relays; between client and backend for direct TCP).",
  delayMsEachWay: 10,
  targets: [{ kind: "atLeast", value: 50 }, { kind: "upstream" }],
});
