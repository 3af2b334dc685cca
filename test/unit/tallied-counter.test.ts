import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { PacketCounter, TalliedCounter } from "../../lib/metrics/tallied-counter.js";
import { closeRequest, dataPacket } from "../../lib/proto/packet.js";

/** The value of one sample in Prometheus text format, as a scraper reads it. */
function sample(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe("TalliedCounter", () => {
  it("shows exact totals on every scrape, without counting anything twice", async () => {
    const registry = new Registry();
    const bytes = new TalliedCounter<"direction">({
      name: "t_bytes_total",
      help: "test",
      labelNames: ["direction"],
      registers: [registry],
    });
    const up = bytes.slot({ direction: "up" });
    const down = bytes.slot({ direction: "down" });
    bytes.add(up, 10);
    bytes.add(up, 5);
    bytes.add(down);
    let text = await registry.metrics();
    expect(sample(text, 't_bytes_total{direction="up"}')).toBe(15);
    expect(sample(text, 't_bytes_total{direction="down"}')).toBe(1);

    text = await registry.metrics();
    expect(sample(text, 't_bytes_total{direction="up"}')).toBe(15);
    bytes.add(up, 1);
    expect((await bytes.get()).values.find((v) => v.labels.direction === "up")?.value).toBe(16);
  });
});

describe("PacketCounter", () => {
  it("counts packets under upstream's segment and packet_type labels", async () => {
    const registry = new Registry();
    const packets = new PacketCounter<"to_agent" | "from_agent">({
      name: "t_stream_packets_total",
      help: "test",
      registers: [registry],
    });
    for (let i = 0; i < 3; i++) packets.count("to_agent", dataPacket(1n, Buffer.from("x")));
    packets.count("from_agent", closeRequest(1n));
    const text = await registry.metrics();
    expect(sample(text, 't_stream_packets_total{segment="to_agent",packet_type="DATA"}')).toBe(3);
    expect(sample(text, 't_stream_packets_total{segment="from_agent",packet_type="CLOSE_REQ"}')).toBe(1);
    expect(sample(text, 't_stream_packets_total{segment="from_agent",packet_type="DATA"}')).toBeUndefined();
  });
});
