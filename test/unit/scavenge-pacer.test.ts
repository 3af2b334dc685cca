import { describe, expect, it } from "vitest";
import { minorGc, SCAVENGE_AFTER_BYTES, ScavengePacer } from "../../lib/transport/scavenge-pacer.js";

/** A pacer whose scavenges are counted and whose deferred runs the test starts itself. */
function countingPacer() {
  const state = { scavenges: 0, deferred: [] as (() => void)[] };
  const pacer = new ScavengePacer(
    () => state.scavenges++,
    SCAVENGE_AFTER_BYTES,
    (run) => state.deferred.push(run),
  );
  const runDeferred = () => {
    for (const run of state.deferred.splice(0)) run();
  };
  return { state, pacer, runDeferred };
}

describe("ScavengePacer", () => {
  it("collects nothing until SCAVENGE_AFTER_BYTES were read", () => {
    const { state, pacer, runDeferred } = countingPacer();
    for (let read = 0; read + 16_384 < SCAVENGE_AFTER_BYTES; read += 16_384) pacer.read(16_384);
    runDeferred();
    expect(state.scavenges).toBe(0);
  });

  it("scavenges once after the reads at hand, not inside the read that crossed the mark", () => {
    const { state, pacer, runDeferred } = countingPacer();
    pacer.read(SCAVENGE_AFTER_BYTES);
    expect(state.scavenges).toBe(0);
    // Reads that come before the deferred run ask for no second scavenge.
    pacer.read(SCAVENGE_AFTER_BYTES);
    pacer.read(16_384);
    expect(state.deferred).toHaveLength(1);
    runDeferred();
    expect(state.scavenges).toBe(1);
  });

  it("counts from zero after each scavenge", () => {
    const { state, pacer, runDeferred } = countingPacer();
    pacer.read(SCAVENGE_AFTER_BYTES);
    runDeferred();
    pacer.read(SCAVENGE_AFTER_BYTES - 1);
    runDeferred();
    expect(state.scavenges).toBe(1);
    pacer.read(1);
    runDeferred();
    expect(state.scavenges).toBe(2);
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
