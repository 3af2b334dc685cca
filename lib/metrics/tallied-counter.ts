/**
 * Counters bumped on every tunneled packet, kept as plain numbers and handed to prom-client when
 * the registry is read.
 *
 * `Counter.inc(labels, n)` builds and hashes a key from the label set on every call; once per
 * packet (three times per DATA packet at the server) it was 1.5–2% of a busy server's and agent's
 * CPU in `--profile` runs of the benchmark. Here the label set is resolved once into a slot and an
 * increment is an array addition; prom-client's `collect` hook flushes the slots before every
 * read, so scrapes and `get()` see exact totals.
 */
import { Counter, type CounterConfiguration } from "prom-client";
import type { Packet } from "../proto/packet.js";
import { packetTypeName } from "../proto/packet.js";

type Labels<T extends string> = Partial<Record<T, string>>;

export class TalliedCounter<T extends string> {
  readonly counter: Counter<T>;
  private readonly labels: Labels<T>[] = [];
  private readonly pending: number[] = [];

  constructor(config: Omit<CounterConfiguration<T>, "collect">) {
    const flush = () => this.flush();
    this.counter = new Counter<T>({
      ...config,
      collect() {
        flush();
      },
    });
  }

  /** A slot for one label set; resolve it once, outside the hot path. */
  slot(labels: Labels<T>): number {
    this.labels.push(labels);
    this.pending.push(0);
    return this.labels.length - 1;
  }

  add(slot: number, n = 1): void {
    this.pending[slot]! += n;
  }

  /** The counter's current values (flushed first), as prom-client's `Counter.get()`. */
  get(): ReturnType<Counter<T>["get"]> {
    return this.counter.get();
  }

  private flush(): void {
    for (let i = 0; i < this.pending.length; i++) {
      const n = this.pending[i]!;
      if (n === 0) continue;
      this.pending[i] = 0; // first: a throwing inc() must not poison every later scrape
      this.counter.inc(this.labels[i]!, n);
    }
  }
}

/** Upstream's `*_stream_packets_total{segment, packet_type}`, counted per packet. */
export class PacketCounter<Segment extends string> {
  private readonly tally: TalliedCounter<"segment" | "packet_type">;
  /** Slot per segment, then per packet type name. */
  private readonly slots = new Map<Segment, Map<string, number>>();

  constructor(config: Omit<CounterConfiguration<"segment" | "packet_type">, "collect" | "labelNames">) {
    this.tally = new TalliedCounter({ ...config, labelNames: ["segment", "packet_type"] });
  }

  count(segment: Segment, packet: Packet): void {
    let bySegment = this.slots.get(segment);
    if (!bySegment) {
      bySegment = new Map();
      this.slots.set(segment, bySegment);
    }
    const type = packetTypeName(packet);
    let slot = bySegment.get(type);
    if (slot === undefined) {
      slot = this.tally.slot({ segment, packet_type: type });
      bySegment.set(type, slot);
    }
    this.tally.add(slot);
  }

  get(): ReturnType<Counter<"segment" | "packet_type">["get"]> {
    return this.tally.get();
  }
}
