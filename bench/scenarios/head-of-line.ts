/**
 * Head-of-line blocking: through one agent, K downloads at once, alone and next to one more
 * connection whose reader has stopped reading (it asked for an endless download and never reads).
 * The figure that matters is how much of their throughput the K keep.
 */
import { connectOpener, grpcOwnChannelOpener, type Opener, tcpOpener } from "../harness/paths.js";
import { startBackend, startKgw, startRelayChain } from "../harness/stacks.js";
import { aggregateDownload } from "../harness/transfer.js";
import type { BenchContext, Cell, Row, Scenario, System } from "../harness/types.js";
import { cellOf, Samples, startUpstreams, upstreamCell } from "./common.js";

const K = 4;

export const headOfLine: Scenario = {
  name: "hol",
  title: `Head-of-line blocking: ${K} downloads through one agent, with and without a stalled reader`,
  description:
    `${K} connections download at once for a fixed window (aggregate MB/s); then the same next to ` +
    "one more connection on the same agent whose client asked for an endless download and never " +
    "reads. Every dial happens before the stall. gRPC: one channel per connection. The kept % is " +
    "stalled over free (median of the repetitions).",
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
  for (let rep = 0; rep < sizes.repeats; rep++) {
    ctx.log(`  repetition ${rep + 1}/${sizes.repeats}`);
    for (const [name, open] of Object.entries(paths)) {
      await s.take(`${name}-free`, () => aggregateDownload(open, K, sizes.holWindowMs, false));
      await s.take(`${name}-stalled`, () => aggregateDownload(open, K, sizes.holWindowMs, true));
    }
  }

  const kept = (key: string): Cell => {
    const free = s.cell(`${key}-free`);
    const stalled = s.cell(`${key}-stalled`);
    if (free.error || stalled.error) return { error: free.error ?? stalled.error };
    return cellOf(() => (100 * stalled.value!) / free.value!);
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
