/**
 * Checks on the benchmark's own instruments: the delay proxy must cost (almost) nothing at 0 ms
 * and add what it is told at 10 ms each way; and a kgw tunnel must not be slowed by having the
 * delay proxy (at 0 ms) between its agent and server.
 */
import { connectOpener, type Opener, tcpOpener } from "../harness/paths.js";
import { eachRound, roundOrder } from "../harness/rounds.js";
import { startBackend, startDelay, startKgw, startRelay, startRelayChain } from "../harness/stacks.js";
import { median } from "../harness/stats.js";
import { bulk, pingRoundTrips } from "../harness/transfer.js";
import type { BenchContext, Cell, Row, Scenario } from "../harness/types.js";
import { Samples } from "./common.js";

const DELAY_MS = 10;

export const calibration: Scenario = {
  name: "calibration",
  title: "Calibration: the delay proxy's own cost",
  description:
    "Download through direct TCP, the relay chain and a kgw CONNECT tunnel, each plain and with the " +
    "delay proxy at 0 ms in the place the WAN scenario puts it (the note gives the ratio to plain), " +
    "and direct TCP through one plain relay hop instead (what any extra user-space hop costs); " +
    `and the PING round trip through the delay proxy at ${DELAY_MS} ms each way (expected: ${2 * DELAY_MS} ms ` +
    "plus timer slack).",
  run,
};

async function run(ctx: BenchContext): Promise<Row[]> {
  const { sizes } = ctx;
  const backend = await startBackend(ctx);
  const target = `127.0.0.1:${backend.port}`;
  const [hop, delay0, delay10, relay, relay0, kgw, kgw0] = await Promise.all([
    startRelay(ctx, backend.port),
    startDelay(ctx, backend.port, 0),
    startDelay(ctx, backend.port, DELAY_MS),
    startRelayChain(ctx, backend.port),
    startRelayChain(ctx, backend.port, 0),
    startKgw(ctx),
    startKgw(ctx, { delayMsEachWay: 0 }),
  ]);

  const paths: Record<string, Opener> = {
    direct: tcpOpener(backend.port),
    "direct-delay0": tcpOpener(delay0.port),
    "direct-hop": tcpOpener(hop.port),
    relay: tcpOpener(relay.port),
    "relay-delay0": tcpOpener(relay0.port),
    kgw: connectOpener(ctx.pki, kgw.frontendPort, target),
    "kgw-delay0": connectOpener(ctx.pki, kgw0.frontendPort, target),
  };
  const s = new Samples(ctx);
  // Warm-up; a failure here shows up in the measurement that follows.
  for (const open of Object.values(paths)) {
    await bulk(open, "download", sizes.bulkBytes / 8, sizes.warmupMs).catch(() => undefined);
  }
  const rtt = new Samples(ctx);
  const rttPaths: Record<string, Opener> = {
    "direct-delay10": tcpOpener(delay10.port),
    direct: tcpOpener(backend.port),
  };
  await eachRound(ctx, async (round) => {
    for (const name of roundOrder(Object.keys(paths), round)) {
      await s.take(
        name,
        async () => (await bulk(paths[name]!, "download", sizes.bulkBytes, sizes.bulkMaxMs)).mbps,
      );
    }
    for (const name of roundOrder(Object.keys(rttPaths), round)) {
      await rtt.take(name, async () => median(await pingRoundTrips(rttPaths[name]!, sizes.pings)));
    }
  });

  const vsPlain = (key: string, plain: string): Cell => {
    const c = s.cell(key);
    const p = s.cell(plain);
    if (c.value === undefined || p.value === undefined) return c;
    return { ...c, note: `${((100 * c.value) / p.value).toFixed(0)}% of plain` };
  };
  const na = { na: "calibration row" };
  return [
    {
      name: "download, plain",
      unit: "MB/s",
      better: "higher",
      noRatios: true,
      cells: { kgw: s.cell("kgw"), direct: s.cell("direct"), relay: s.cell("relay"), upstream: na },
    },
    {
      name: "download, delay proxy at 0 ms in the WAN position",
      unit: "MB/s",
      better: "higher",
      noRatios: true,
      cells: {
        kgw: vsPlain("kgw-delay0", "kgw"),
        direct: vsPlain("direct-delay0", "direct"),
        relay: vsPlain("relay-delay0", "relay"),
        upstream: na,
      },
    },
    {
      name: "download, one plain relay hop in the delay proxy's place",
      unit: "MB/s",
      better: "higher",
      noRatios: true,
      cells: { kgw: na, direct: vsPlain("direct-hop", "direct"), relay: na, upstream: na },
    },
    {
      name: "PING round trip, direct TCP, plain (p50)",
      unit: "ms",
      better: "lower",
      noRatios: true,
      cells: { kgw: na, direct: rtt.cell("direct"), relay: na, upstream: na },
    },
    {
      name: `PING round trip, direct TCP through the delay proxy at ${DELAY_MS} ms each way (p50)`,
      unit: "ms",
      better: "lower",
      noRatios: true,
      cells: { kgw: na, direct: rtt.cell("direct-delay10"), relay: na, upstream: na },
    },
  ];
}
