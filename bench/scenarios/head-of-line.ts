/**
 * Head-of-line blocking: through one agent, K downloads at once, alone and next to one more
 * connection whose reader has stopped reading (it asked for an endless download and never reads).
 * The figure that matters is how much of their throughput the K keep.
 */
import { connectOpener, grpcOwnChannelOpener, type Opener, tcpOpener } from "../harness/paths.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { startBackend, startKgw, startRelayChain } from "../harness/stacks.js";
import { aggregateDownload } from "../harness/transfer.js";
import type { BenchContext, Cell, Row, Scenario, System } from "../harness/types.js";
import { roundsCell, Samples, startUpstreams, upstreamCell } from "./common.js";

const K = 4;

export const headOfLine: Scenario = {
  name: "hol",
  title: `Head-of-line blocking: ${K} downloads through one agent, with and without a stalled reader`,
  description:
    `${K} connections download at once for a fixed window (aggregate MB/s); then the same next to ` +
    "one more connection on the same agent whose client asked for an endless download and never " +
    "reads. Every dial happens before the stall. gRPC: one channel per connection. The kept % is " +
    "stalled over free within each round (median over rounds).",
  run,
};

async function run(ctx: BenchContext): Promise<Row[]> {
  const { sizes } = ctx;
  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const [relay, kgw, up] = await Promise.all([
    startRelayChain(ctx, backend.port),
    startKgw(ctx),
    startUpstreams(ctx, ["grpc", "connect"]),
  ]);

  const paths: Record<string, Opener> = {
    direct: tcpOpener(backend.port),
    relay: tcpOpener(relay.port),
    "kgw-connect": connectOpener(ctx.pki, kgw.frontendPort, target),
    "kgw-grpc": grpcOwnChannelOpener(ctx.pki, kgw.frontendPort, target),
  };
  if (up.connect && !(up.connect instanceof Error)) {
    paths["up-connect"] = connectOpener(ctx.pki, up.connect.frontendPort, target);
  }
  if (up.grpc && !(up.grpc instanceof Error)) {
    paths["up-grpc"] = grpcOwnChannelOpener(ctx.pki, up.grpc.frontendPort, target);
  }

  const s = new Samples(ctx);
  await eachRound(ctx, async (round) => {
    for (const name of roundOrder(Object.keys(paths), round)) {
      const open = paths[name]!;
      await s.take(`${name}-free`, () => aggregateDownload(open, K, sizes.holWindowMs, false));
      await s.take(`${name}-stalled`, () => aggregateDownload(open, K, sizes.holWindowMs, true));
    }
  });

  /** Stalled over free, round by round; the figure is the median of the rounds. */
  const kept = (key: string): Cell => {
    const free = s.cell(`${key}-free`);
    const stalled = s.cell(`${key}-stalled`);
    if (free.error || stalled.error) return { error: free.error ?? stalled.error };
    return roundsCell(stalled.rounds!.map((v, i) => (100 * v) / free.rounds![i]!));
  };
  const rows: Row[] = [];
  for (const [mode, label] of [
    ["connect", "HTTP CONNECT"],
    ["grpc", "gRPC frontend"],
  ] as const) {
    const cells = (f: (key: string) => Cell): Partial<Record<System, Cell>> => ({
      kgw: f(`kgw-${mode}`),
      direct: f("direct"),
      relay: f("relay"),
      upstream: upstreamCell(ctx, up[mode], () => f(`up-${mode}`)),
    });
    rows.push(
      {
        name: `${K} downloads, ${label}, no stall`,
        unit: "MB/s",
        better: "higher",
        targets: [{ kind: "upstream" }],
        cells: cells((k) => s.cell(`${k}-free`)),
      },
      {
        name: `${K} downloads, ${label}, next to a stalled reader`,
        unit: "MB/s",
        better: "higher",
        targets: [{ kind: "upstream" }],
        cells: cells((k) => s.cell(`${k}-stalled`)),
      },
      {
        name: `throughput kept under a stall, ${label}`,
        unit: "%",
        better: "higher",
        noRatios: true,
        targets: [{ kind: "atLeast", value: 90 }, { kind: "upstream" }],
        cells: cells(kept),
      },
    );
  }
  return rows;
}
