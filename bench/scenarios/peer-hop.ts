/**
 * A peer hop (issue 15): what a dial pays for entering the fleet at an instance that does not
 * hold the tenant's agent. A local fleet of two instances (bench/harness/fleet-stack.ts: dynalite,
 * `kgw server --registry-table`, the tenant made with `kgw tenant --table`), the tenant's agent
 * on instance 1. Each round measures, interleaved (the order reversed every other round):
 *  - "one instance": the tenant's caller dials instance 1, whose agent serves it;
 *  - "through a peer hop": the same caller dials instance 2, which forwards over its peer link
 *    to instance 1 (the route cached after the warm-up: no registry call per dial);
 * with the same agent, backend and caller credentials, and the baselines (direct TCP, the relay
 * chain). Rows: CONNECT and gRPC bulk transfers (every byte checked), and dials to the first
 * byte over CONNECT (a new mTLS connection each) and gRPC (a new stream on an open channel).
 */

import { startBenchFleet } from "../harness/fleet-stack.js";
import { metric, scrape } from "../harness/metrics-scrape.js";
import { connectOpener, grpcRotatingOpener, type Opener, tcpOpener } from "../harness/paths.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { startBackend, startRelayChain } from "../harness/stacks.js";
import { bulk, type Direction, dialLatencies } from "../harness/transfer.js";
import {
  type BenchContext,
  type Cell,
  HOP_SYSTEM,
  type Row,
  type Scenario,
  type System,
} from "../harness/types.js";
import { Samples } from "./common.js";

type Path = "one" | "hop" | "direct" | "relay";
const PATHS: Path[] = ["one", "hop", "direct", "relay"];
const SYSTEM_OF: Record<Path, System> = { one: "kgw", hop: HOP_SYSTEM, direct: "direct", relay: "relay" };
const DIRECTIONS: Direction[] = ["download", "upload"];
const WARMUP_BYTES = 32 * 1024 * 1024;
/** How long the fleet is left alone to count its registry requests at rest. */
const REST_MS = { quick: 2_000, full: 20_000 };
const REQUESTS = "kgw_fleet_registry_requests_total";
/** Issue 26's target for what a hop adds to a dial's p50 (issue 15's was 1 ms). */
const HOP_ADDED_TARGET_MS = 0.5;

/** Registry requests both instances have sent so far (every operation, retries included). */
async function registryRequests(ports: number[]): Promise<number> {
  const texts = await Promise.all(ports.map(scrape));
  return texts.reduce((sum, t) => sum + metric(t, REQUESTS, ""), 0);
}

export const peerHop: Scenario = {
  name: "peer-hop",
  title: "A peer hop: dials entering the fleet at an instance without the tenant's agent",
  description:
    "A local fleet of two kgw instances (dynalite as DynamoDB, tenant mode, --agent-redundancy=1), " +
    "the tenant's agent on instance 1. The same caller dials instance 1 (one instance) and " +
    "instance 2 (forwarded over a peer link to instance 1), interleaved round by round, beside " +
    "direct TCP and the relay chain: CONNECT and gRPC bulk transfers (every byte checked) and " +
    "dials to the first byte. hop/one is taken within each round; targets are issue 26's. The servers' CPU per dial and per MB (both instances, from /proc) is the load-robust figure.",
  run,
};

async function run(ctx: BenchContext): Promise<Row[]> {
  const { sizes } = ctx;
  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const [relay, fleet] = await Promise.all([startRelayChain(ctx, backend.port), startBenchFleet(ctx, 2, 0)]);
  const [home, away] = fleet.instances as [(typeof fleet.instances)[0], (typeof fleet.instances)[0]];
  const grpcOne = grpcRotatingOpener(fleet.callers, home.agentPort, target);
  const grpcHop = grpcRotatingOpener(fleet.callers, away.agentPort, target);
  ctx.scope.defer(() => {
    grpcOne.close();
    grpcHop.close();
  });
  // Tunnels opened through the fleet, to divide its registry requests by.
  let fleetDials = 0;
  const counted =
    (open: Opener): Opener =>
    () => {
      fleetDials++;
      return open();
    };
  const openers: Record<"connect" | "grpc", Record<Path, Opener>> = {
    connect: {
      one: counted(connectOpener(fleet.callers, home.agentPort, target)),
      hop: counted(connectOpener(fleet.callers, away.agentPort, target)),
      direct: tcpOpener(backend.port),
      relay: tcpOpener(relay.port),
    },
    grpc: {
      one: counted(grpcOne.open),
      hop: counted(grpcHop.open),
      direct: tcpOpener(backend.port),
      relay: tcpOpener(relay.port),
    },
  };

  // Warm-up: JIT, channels, and instance 2's route to the tenant (its first dial reads it).
  for (const kind of ["connect", "grpc"] as const) {
    for (const path of PATHS) await dialLatencies(openers[kind][path], sizes.warmupDials);
  }
  for (const path of PATHS) {
    for (const dir of DIRECTIONS) {
      await bulk(openers.connect[path], dir, Math.min(WARMUP_BYTES, sizes.bulkBytes), sizes.warmupMs);
    }
  }

  const mbps = new Samples(ctx);
  const lat = new Samples(ctx);
  // CPU of both instances in µs (load-robust where latency is not): per dial, and per MB carried.
  const cpu = new Samples(ctx);
  const fleetCpu = () => home.server.cpuSeconds() + away.server.cpuSeconds();
  const cpuOf = async <T>(key: string, per: (r: T) => number, f: () => Promise<T>): Promise<T> => {
    const [c0, a0] = [fleetCpu(), away.server.cpuSeconds()];
    const r = await f();
    const [c1, a1] = [fleetCpu(), away.server.cpuSeconds()];
    await cpu.take(key, async () => ((c1 - c0) * 1e6) / per(r));
    await cpu.take(`${key}-away`, async () => ((a1 - a0) * 1e6) / per(r));
    return r;
  };
  const adminPorts = fleet.instances.map((i) => i.adminPort);
  const registry = new Samples(ctx);
  const restMs = ctx.options.quick ? REST_MS.quick : REST_MS.full;
  await eachRound(ctx, async (round) => {
    const requestsBefore = await registryRequests(adminPorts);
    const dialsBefore = fleetDials;
    const roundStart = Date.now();
    for (const path of roundOrder(PATHS, round)) {
      for (const kind of ["connect", "grpc"] as const) {
        // Baselines dial plain TCP: the same figure for both kinds, measured once.
        if (kind === "grpc" && (path === "direct" || path === "relay")) continue;
        ctx.log(`    ${path}: ${kind} dials`);
        const fleetPath = path === "one" || path === "hop";
        await lat.takeRound(`${kind}-${path}`, () =>
          fleetPath
            ? cpuOf(
                `${kind}-dial-${path}`,
                (ms: number[]) => ms.length,
                () => dialLatencies(openers[kind][path], sizes.latencyDials),
              )
            : dialLatencies(openers[kind][path], sizes.latencyDials),
        );
        for (const dir of DIRECTIONS) {
          if (kind === "grpc" && dir === "upload") continue;
          ctx.log(`    ${path}: ${kind} ${dir}`);
          const transfer = () => bulk(openers[kind][path], dir, sizes.bulkBytes, sizes.bulkMaxMs);
          await mbps.take(
            `${kind}-${dir}-${path}`,
            async () =>
              (fleetPath
                ? await cpuOf(`${kind}-${dir}-${path}`, (r: { bytes: number }) => r.bytes / 1e6, transfer)
                : await transfer()
              ).mbps,
          );
        }
      }
    }
    // The registry's share: requests during the round, less what the fleet sends at rest (its
    // heartbeats, lease lists, tenant watch) over as long, per tunnel opened through it.
    const roundMs = Date.now() - roundStart;
    const inRound = (await registryRequests(adminPorts)) - requestsBefore;
    const dials = fleetDials - dialsBefore;
    const restStart = await registryRequests(adminPorts);
    await new Promise((r) => setTimeout(r, restMs));
    const atRest = ((await registryRequests(adminPorts)) - restStart) / (restMs / 1000);
    await registry.take("rest", async () => atRest / adminPorts.length);
    await registry.take("dial", async () => Math.max(0, inRound - atRest * (roundMs / 1000)) / dials);
  });

  const upstream: Cell = { na: "upstream has no fleet: one server per control plane" };
  const cells = (f: (path: Path) => Cell): Partial<Record<System, Cell>> => ({
    ...Object.fromEntries(PATHS.map((p) => [SYSTEM_OF[p], f(p)])),
    upstream,
  });
  const baselineKey = (kind: "connect" | "grpc", path: Path) =>
    path === "direct" || path === "relay" ? "connect" : kind;
  const rows: Row[] = [];
  for (const [kind, label] of [
    ["connect", "HTTP CONNECT"],
    ["grpc", "gRPC"],
  ] as const) {
    for (const dir of DIRECTIONS) {
      if (kind === "grpc" && dir === "upload") continue;
      rows.push({
        name: `${dir}, ${label}`,
        unit: "MB/s",
        better: "higher",
        cells: cells((p) => mbps.cell(`${baselineKey(kind, p)}-${dir}-${p}`)),
        targets: [{ kind: "hopRatio", min: 0.8 }],
      });
    }
  }
  for (const [kind, label] of [
    ["connect", "CONNECT dial to first byte (new mTLS connection)"],
    ["grpc", "gRPC dial to first byte (new stream on an open channel)"],
  ] as const) {
    for (const p of [50, 99]) {
      rows.push({
        name: `${label}, p${p}`,
        unit: "ms",
        better: "lower",
        cells: cells((path) => lat.percentileCell(`${baselineKey(kind, path)}-${path}`, p)),
        ...(p === 50 ? { targets: [{ kind: "hopAdded" as const, ms: HOP_ADDED_TARGET_MS }] } : {}),
      });
    }
  }
  // The fleet's CPU: both instances (one instance: the other is idle but counted alike).
  const awayNote = (key: string): string | undefined => {
    const c = cpu.cell(`${key}-away`);
    return typeof c.value === "number"
      ? `forwarding instance ${Math.round(c.value).toLocaleString("en-US")}`
      : undefined;
  };
  const cpuCells = (key: (path: "one" | "hop") => string): Partial<Record<System, Cell>> => ({
    kgw: cpu.cell(key("one")),
    [HOP_SYSTEM]: cpu.cell(key("hop"), awayNote(key("hop"))),
    direct: { na: "not a kgw process" },
    relay: { na: "not a kgw process" },
    upstream,
  });
  for (const [kind, label] of [
    ["connect", "CONNECT dial (new mTLS connection)"],
    ["grpc", "gRPC dial (new stream on an open channel)"],
  ] as const) {
    rows.push({
      name: `kgw servers' CPU per ${label}, both instances`,
      unit: "µs/dial",
      better: "lower",
      cells: cpuCells((path) => `${kind}-dial-${path}`),
    });
  }
  for (const [kind, dir, label] of [
    ["connect", "download", "download, HTTP CONNECT"],
    ["connect", "upload", "upload, HTTP CONNECT"],
    ["grpc", "download", "download, gRPC"],
  ] as const) {
    rows.push({
      name: `kgw servers' CPU per MB, ${label}, both instances`,
      unit: "µs/MB",
      better: "lower",
      cells: cpuCells((path) => `${kind}-${dir}-${path}`),
    });
  }
  const registryOnly = (cell: Cell): Partial<Record<System, Cell>> => ({
    kgw: cell,
    [HOP_SYSTEM]: { na: "one figure for the fleet" },
    direct: { na: "no registry" },
    relay: { na: "no registry" },
    upstream,
  });
  rows.push(
    {
      name: "registry (DynamoDB) requests per tunnel opened, at steady state",
      unit: "req/dial",
      better: "lower",
      noRatios: true,
      cells: registryOnly(registry.cell("dial", "less the rate at rest over the round's length")),
    },
    {
      name: "registry (DynamoDB) requests per second per instance, at rest",
      unit: "req/s",
      better: "lower",
      noRatios: true,
      cells: registryOnly(
        registry.cell("rest", `${restMs / 1000} s idle after each round; 2 instances, 1 tenant`),
      ),
    },
  );
  return rows;
}
