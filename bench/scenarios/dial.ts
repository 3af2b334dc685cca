/**
 * Dial latency and dial rate.
 *  - Request to first byte: the dial request, then a PING as soon as the tunnel is up, until its
 *    answer. CONNECT includes a fresh mTLS handshake per tunnel (as kube-apiserver makes);
 *    gRPC opens a stream on a channel that is already connected.
 *  - Dial round trip on an open stream: DIAL_REQ → DIAL_RSP on a ProxyService stream that is
 *    already open (the first dial of each stream is not counted), nothing else.
 *  - Sustained dials per second: many dialers at once, each dialing to the first byte and closing,
 *    back to back, for a fixed time.
 * The baselines dial plain TCP (direct, or into the relay chain) to the first byte. With
 * --tenant-mode, kgw in tenant mode is measured as kgw is, its callers on the agent port.
 */
import type { Client } from "@grpc/grpc-js";
import { GoClient } from "../harness/go-client.js";
import { connectOpener, grpcRotatingOpener, type Opener, tcpOpener } from "../harness/paths.js";
import type { BenchPki } from "../harness/pki.js";
import { RawProxyStream, rawProxyClient } from "../harness/raw.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { startBackend, startKgw, startRelayChain, type TunnelStack } from "../harness/stacks.js";
import { dialAndClose, dialLatencies, sustainedRate } from "../harness/transfer.js";
import type { BenchContext, Cell, Row, Scenario, Target } from "../harness/types.js";
import { Samples, startTenantIfAsked, startUpstreams, tenantCell, upstreamCell } from "./common.js";
import { startCurlPaths } from "./curl-paths.js";
import { GO_BASELINE_NA, goCell, startGoPaths } from "./go-paths.js";

/** Dials per concurrent dialer in a curl or Go client dial-rate run (a fixed count: curl takes no duration). */
const EXTERNAL_RATE_DIALS_PER_DIALER = 20;

/** Dials per stream in the open-stream measurement (upstream keeps each connection until the
 * stream ends: it ends the stream on CLOSE_REQ, so connections are not closed one by one). */
const DIALS_PER_STREAM = 50;

export const dial: Scenario = {
  name: "dial",
  title: "Dial latency and dial rate",
  description:
    "Sequential dials timed from the request to the first byte of the backend's answer to a PING " +
    "sent once the tunnel is up (p50/p99 of each round, median over rounds); DIAL_REQ→DIAL_RSP " +
    "round trips on an already open gRPC stream; and sustained dials/s with many concurrent " +
    "dialers, each dial going to the first byte and closing. Baselines dial plain TCP to the first " +
    "byte.",
  run,
};

async function run(ctx: BenchContext): Promise<Row[]> {
  const { sizes } = ctx;
  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const [relay, kgw, tenant, up] = await Promise.all([
    startRelayChain(ctx, backend.port),
    startKgw(ctx),
    startTenantIfAsked(ctx),
    startUpstreams(ctx, ["grpc", "connect"]),
  ]);
  const upGrpc = up.grpc instanceof Error ? undefined : up.grpc;
  const upConnect = up.connect instanceof Error ? undefined : up.connect;

  const rawClients = new Map<string, Client>();
  ctx.scope.defer(() => {
    for (const c of rawClients.values()) c.close();
  });
  // `pki` holds the callers' credentials: the frontend caller's, or the tenant's.
  const sharedGrpc = (stack: TunnelStack, pki: BenchPki = ctx.pki): Opener => {
    const o = grpcRotatingOpener(pki, stack.frontendPort, target);
    ctx.scope.defer(() => o.close());
    return o.open;
  };
  const rawClient = (key: string, stack: TunnelStack, pki: BenchPki = ctx.pki): Client => {
    const client = rawProxyClient(pki, stack.frontendPort);
    rawClients.set(key, client);
    return client;
  };

  const openers: Record<string, Opener> = {
    direct: tcpOpener(backend.port),
    relay: tcpOpener(relay.port),
    "kgw-connect": connectOpener(ctx.pki, kgw.frontendPort, target),
    "kgw-grpc": sharedGrpc(kgw),
  };
  const raw: Record<string, Client> = { "kgw-raw": rawClient("kgw", kgw) };
  if (tenant && !(tenant instanceof Error)) {
    const { stack, callers } = tenant;
    openers["tenant-connect"] = connectOpener(callers, stack.frontendPort, target);
    openers["tenant-grpc"] = sharedGrpc(stack, callers);
    raw["tenant-raw"] = rawClient("tenant", stack, callers);
  }
  if (upConnect) openers["up-connect"] = connectOpener(ctx.pki, upConnect.frontendPort, target);
  if (upGrpc) openers["up-grpc"] = sharedGrpc(upGrpc);
  if (upGrpc) raw["up-raw"] = rawClient("up", upGrpc);

  const curl = await startCurlPaths(ctx, { kgw, tenant, upConnect: up.connect });
  const externalRateDials = sizes.dialConcurrency * EXTERNAL_RATE_DIALS_PER_DIALER;
  const go = await startGoPaths(ctx, { kgw, tenant, upGrpc: up.grpc, target });
  const goClient = go.client instanceof GoClient ? go.client : null;

  // Warm-up once per path, then every path in every round (order reversed every other round).
  const lat = new Samples(ctx);
  for (const [name, route] of goClient ? Object.entries(go.routes) : []) {
    ctx.log(`  warm-up Go client ${name}`);
    const key = `go-${name}`;
    await lat.takeRound(`${key}-warmup`, () => goClient!.dialLatencies(route, sizes.warmupDials));
    if (lat.failed(`${key}-warmup`)) lat.fail(key, new Error("failed during warm-up"));
  }
  for (const [name, route] of Object.entries(curl.routes)) {
    ctx.log(`  warm-up curl ${name}`);
    const key = `curl-${name}`;
    await lat.takeRound(`${key}-warmup`, () => curl.client.dialLatencies(route, sizes.warmupDials));
    if (lat.failed(`${key}-warmup`)) lat.fail(key, new Error("failed during warm-up"));
  }
  for (const [name, open] of Object.entries(openers)) {
    ctx.log(`  warm-up ${name}`);
    await lat.takeRound(`${name}-warmup`, () => dialLatencies(open, sizes.warmupDials));
    if (lat.failed(`${name}-warmup`)) lat.fail(name, new Error("failed during warm-up"));
  }
  const rate = new Samples(ctx);
  const rateOf = async (key: string, task: () => Promise<void>) => {
    await rate.take(key, async () => {
      const r = await sustainedRate(task, sizes.dialConcurrency, sizes.dialRateMs);
      if (r.ok === 0 || r.errors > r.ok / 100) {
        throw new Error(`${r.errors} of ${r.ok + r.errors} dials failed, first: ${r.firstError}`);
      }
      return r.perSecond;
    });
  };
  // Dial rate on open streams: ours only (upstream ends a stream on its first CLOSE_REQ).
  const rawDialers: Record<string, () => Promise<void>> = {};
  for (const name of ["kgw-raw", "tenant-raw"]) {
    if (raw[name]) rawDialers[name] = openStreamDialTask(ctx, raw[name], target, sizes.dialConcurrency);
  }
  await eachRound(ctx, async (round) => {
    for (const name of roundOrder(Object.keys(curl.routes), round)) {
      if (lat.failed(`curl-${name}`)) continue;
      ctx.log(`    latency curl ${name}`);
      await lat.takeRound(`curl-${name}`, () =>
        curl.client.dialLatencies(curl.routes[name]!, sizes.latencyDials),
      );
    }
    for (const name of roundOrder(Object.keys(curl.routes), round)) {
      if (rate.failed(`curl-${name}`)) continue;
      ctx.log(`    dial rate curl ${name}`);
      await rate.take(`curl-${name}`, () =>
        curl.client.dialRate(curl.routes[name]!, externalRateDials, sizes.dialConcurrency),
      );
    }
    for (const name of goClient ? roundOrder(Object.keys(go.routes), round) : []) {
      if (lat.failed(`go-${name}`)) continue;
      ctx.log(`    latency Go client ${name}`);
      await lat.takeRound(`go-${name}`, () => goClient!.dialLatencies(go.routes[name]!, sizes.latencyDials));
    }
    for (const name of goClient ? roundOrder(Object.keys(go.routes), round) : []) {
      if (rate.failed(`go-${name}`)) continue;
      ctx.log(`    dial rate Go client ${name}`);
      await rate.take(`go-${name}`, () =>
        goClient!.dialRate(go.routes[name]!, externalRateDials, sizes.dialConcurrency),
      );
    }
    for (const name of roundOrder(Object.keys(openers), round)) {
      ctx.log(`    latency ${name}`);
      await lat.takeRound(name, () => dialLatencies(openers[name]!, sizes.latencyDials));
    }
    for (const name of roundOrder(Object.keys(raw), round)) {
      ctx.log(`    open-stream round trips ${name}`);
      await lat.takeRound(name, () => openStreamRoundTrips(raw[name]!, target, sizes.latencyDials));
    }
    for (const name of roundOrder([...Object.keys(openers), ...Object.keys(rawDialers)], round)) {
      ctx.log(`    dial rate ${name}`);
      await rateOf(name, rawDialers[name] ?? dialAndClose(openers[name]!));
    }
  });

  /** The p-th percentile of each round's dials; the figure is their median over rounds. */
  const pct = (key: string, p: number): Cell => lat.percentileCell(key, p);
  /** kgw's key (`kgw-connect`) → the same path in tenant mode (`tenant-connect`). */
  const tenantKey = (kgwKey: string) => kgwKey.replace(/^kgw-/, "tenant-");
  const latencyRow = (name: string, kgwKey: string, upKey: string, p: number, targets: Target[]): Row => ({
    name: `${name}, p${p}`,
    unit: "ms",
    better: "lower",
    targets,
    cells: {
      kgw: pct(kgwKey, p),
      ...tenantCell(tenant, () => pct(tenantKey(kgwKey), p)),
      direct: pct("direct", p),
      relay: pct("relay", p),
      upstream: upstreamCell(ctx, upKey.endsWith("connect") ? up.connect : up.grpc, () => pct(upKey, p)),
    },
  });
  const timeTargets = (p: number): Target[] => [
    { kind: "atMost", value: p === 50 ? 1 : 5 },
    { kind: "upstream" },
  ];
  const curlLatencyRow = (p: number): Row => ({
    name: `CONNECT dial to first byte (curl, new mTLS connection, no resumption), p${p}`,
    unit: "ms",
    better: "lower",
    targets: [{ kind: "upstream" }],
    cells: {
      kgw: pct("curl-kgw", p),
      ...tenantCell(tenant, () => pct("curl-tenant", p)),
      direct: pct("curl-direct", p),
      relay: pct("curl-relay", p),
      upstream: upstreamCell(ctx, up.connect, () => pct("curl-up", p)),
    },
  });
  const goLatencyRow = (p: number): Row => ({
    name: `gRPC dial to first byte (Go konnectivity-client, single-use tunnel: new mTLS connection), p${p}`,
    unit: "ms",
    better: "lower",
    targets: [{ kind: "upstream" }],
    cells: {
      kgw: goCell(go, () => pct("go-kgw", p)),
      ...tenantCell(tenant, () => goCell(go, () => pct("go-tenant", p))),
      direct: GO_BASELINE_NA,
      relay: GO_BASELINE_NA,
      upstream: upstreamCell(ctx, up.grpc, () => goCell(go, () => pct("go-up", p))),
    },
  });
  const c = sizes.dialConcurrency;
  const rows: Row[] = [
    curlLatencyRow(50),
    curlLatencyRow(99),
    {
      name: `dials/s, CONNECT (curl), ${c} concurrent`,
      unit: "dials/s",
      better: "higher",
      targets: [{ kind: "upstream" }],
      cells: {
        kgw: rate.cell("curl-kgw"),
        ...tenantCell(tenant, () => rate.cell("curl-tenant")),
        direct: rate.cell("curl-direct"),
        relay: rate.cell("curl-relay"),
        upstream: upstreamCell(ctx, up.connect, () => rate.cell("curl-up")),
      },
    },
    goLatencyRow(50),
    goLatencyRow(99),
    {
      name: `dials/s, gRPC (Go konnectivity-client, single-use tunnel), ${c} concurrent`,
      unit: "dials/s",
      better: "higher",
      targets: [{ kind: "upstream" }],
      cells: {
        kgw: goCell(go, () => rate.cell("go-kgw")),
        ...tenantCell(tenant, () => goCell(go, () => rate.cell("go-tenant"))),
        direct: GO_BASELINE_NA,
        relay: GO_BASELINE_NA,
        upstream: upstreamCell(ctx, up.grpc, () => goCell(go, () => rate.cell("go-up"))),
      },
    },
  ];
  for (const p of [50, 99]) {
    rows.push(
      latencyRow("CONNECT dial to first byte (new mTLS connection)", "kgw-connect", "up-connect", p, [
        { kind: "upstream" },
      ]),
    );
  }
  for (const p of [50, 99]) {
    rows.push(
      latencyRow(
        "gRPC dial to first byte (new stream on an open channel)",
        "kgw-grpc",
        "up-grpc",
        p,
        timeTargets(p),
      ),
    );
  }
  for (const p of [50, 99]) {
    rows.push(
      latencyRow(
        "dial round trip on an open stream (DIAL_REQ→DIAL_RSP)",
        "kgw-raw",
        "up-raw",
        p,
        timeTargets(p),
      ),
    );
  }
  const rateTargets: Target[] = [{ kind: "atLeast", value: 5000 }, { kind: "upstream" }];
  rows.push(
    {
      name: `dials/s, CONNECT, ${c} concurrent`,
      unit: "dials/s",
      better: "higher",
      targets: rateTargets,
      cells: {
        kgw: rate.cell("kgw-connect"),
        ...tenantCell(tenant, () => rate.cell("tenant-connect")),
        direct: rate.cell("direct"),
        relay: rate.cell("relay"),
        upstream: upstreamCell(ctx, up.connect, () => rate.cell("up-connect")),
      },
    },
    {
      name: `dials/s, gRPC, stream per dial, ${c} concurrent`,
      unit: "dials/s",
      better: "higher",
      targets: rateTargets,
      cells: {
        kgw: rate.cell("kgw-grpc"),
        ...tenantCell(tenant, () => rate.cell("tenant-grpc")),
        direct: rate.cell("direct"),
        relay: rate.cell("relay"),
        upstream: upstreamCell(ctx, up.grpc, () => rate.cell("up-grpc")),
      },
    },
    {
      name: `dials/s, on ${c} open streams (dial, PING, CLOSE_REQ)`,
      unit: "dials/s",
      better: "higher",
      targets: [{ kind: "atLeast", value: 5000 }],
      cells: {
        kgw: rate.cell("kgw-raw"),
        ...tenantCell(tenant, () => rate.cell("tenant-raw")),
        direct: rate.cell("direct"),
        relay: rate.cell("relay"),
        upstream: ctx.upstream
          ? { na: "upstream ends a frontend stream on its first CLOSE_REQ: one connection per stream" }
          : { na: ctx.upstreamNa },
      },
    },
  );
  return rows;
}

/**
 * `count` DIAL_REQ → DIAL_RSP round trips, DIALS_PER_STREAM per stream; the first dial of each
 * stream (which also opens it) is not counted. Connections stay open until their stream ends.
 */
async function openStreamRoundTrips(client: Client, target: string, count: number): Promise<number[]> {
  const out: number[] = [];
  const perStream = Math.min(DIALS_PER_STREAM, count);
  while (out.length < count) {
    const stream = new RawProxyStream(client);
    try {
      await stream.dial(target);
      for (let i = 0; i < perStream && out.length < count; i++) out.push((await stream.dial(target)).ms);
    } finally {
      stream.end();
    }
  }
  return out;
}

/** Dialers on open streams: dial, PING, CLOSE_REQ → CLOSE_RSP, again. One stream per dialer. */
function openStreamDialTask(
  ctx: BenchContext,
  client: Client,
  target: string,
  streams: number,
): () => Promise<void> {
  const idle: RawProxyStream[] = Array.from({ length: streams }, () => new RawProxyStream(client));
  ctx.scope.defer(() => {
    for (const s of idle) s.end();
  });
  return async () => {
    const stream = idle.pop();
    if (!stream) throw new Error("more dialers than streams");
    try {
      const { connectId } = await stream.dial(target);
      await stream.ping(connectId);
      await stream.close(connectId);
      idle.push(stream);
    } catch (err) {
      // A stream in an unknown state is not reused.
      stream.end();
      idle.push(new RawProxyStream(client));
      throw err;
    }
  };
}
