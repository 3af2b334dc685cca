import { describe, expect, it } from "vitest";
import {
  minorGc,
  SCAVENGE_AFTER_BYTES,
  SCAVENGE_BUSY_CHECK_MS,
  SCAVENGE_IDLE_CHECK_MS,
  ScavengePacer,
} from "../../lib/transport/scavenge-pacer.js";

/** ArrayBuffer memory as the test sets it; a scavenge frees `freedByScavenge` of it. */
function fakeHeap(start: number, freedByScavenge: number) {
  const heap = { bytes: start, scavenges: 0, cpu: 0 };
  const pacer = new ScavengePacer({
    arrayBufferBytes: () => heap.bytes,
    cpuMicros: () => heap.cpu,
    scavenge: () => {
      heap.scavenges++;
      heap.bytes -= freedByScavenge;
    },
  });
  return { heap, pacer };
}

describe("ScavengePacer", () => {
  it("never collects in an idle process, and looks only once a second", () => {
    const { heap, pacer } = fakeHeap(10_000_000, 0);
    for (let i = 0; i < 1000; i++) expect(pacer.check()).toBe(SCAVENGE_IDLE_CHECK_MS);
    expect(heap.scavenges).toBe(0);
  });

  it("looks again soon while the process works, and slows down when it stops", () => {
    const { heap, pacer } = fakeHeap(1_000_000, 0);
    heap.cpu += 5_000; // 5 ms of CPU since the last look: moving data
    expect(pacer.check()).toBe(SCAVENGE_BUSY_CHECK_MS);
    heap.cpu += 100;
    expect(pacer.check()).toBe(SCAVENGE_IDLE_CHECK_MS);
  });

  it("collects once buffers grew by SCAVENGE_AFTER_BYTES since the last collection, and counts from after it", () => {
    const { heap, pacer } = fakeHeap(1_000_000, 3_000_000);
    heap.bytes += SCAVENGE_AFTER_BYTES - 1;
    pacer.check();
    expect(heap.scavenges).toBe(0);
    heap.bytes += 1;
    pacer.check();
    expect(heap.scavenges).toBe(1);
    // What the scavenge left is the new base: the next one needs another SCAVENGE_AFTER_BYTES.
    heap.bytes += SCAVENGE_AFTER_BYTES - 1;
    pacer.check();
    expect(heap.scavenges).toBe(1);
    heap.bytes += 1;
    pacer.check();
    expect(heap.scavenges).toBe(2);
  });

  it("follows memory down when V8 collected by itself, so growth is counted from there", () => {
    const { heap, pacer } = fakeHeap(50_000_000, 0);
    heap.bytes = 5_000_000; // a GC of V8's own freed most of it
    pacer.check();
    expect(heap.scavenges).toBe(0);
    heap.bytes += SCAVENGE_AFTER_BYTES;
    pacer.check();
    expect(heap.scavenges).toBe(1);
  });

  it("minorGc frees dead ArrayBuffers in this process without exposing gc globally", () => {
    const scavenge = minorGc();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
    scavenge(); // start from a clean young generation
    const before = process.memoryUsage().arrayBuffers;
    for (let i = 0; i < 256; i++) Buffer.alloc(64 * 1024); // 16 MiB of garbage
    const grown = process.memoryUsage().arrayBuffers - before;
    scavenge();
    const after = process.memoryUsage().arrayBuffers - before;
    expect(after).toBeLessThan(grown / 2);
  });
});
