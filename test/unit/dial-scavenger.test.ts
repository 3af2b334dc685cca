import { getHeapStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { DialScavenger, dialScavenger } from "../../lib/transport/dial-scavenger.js";
import { SCAVENGE_AFTER_BYTES } from "../../lib/transport/scavenge-pacer.js";

/** A scavenger over a fake external-memory counter; its deferred runs are started by the test. */
function fakeScavenger(startBytes = 10_000_000) {
  const state = { external: startBytes, scavenges: 0, deferred: [] as (() => void)[] };
  const scavenger = new DialScavenger(
    () => state.external,
    () => {
      state.scavenges++;
      // A scavenge frees most of what the dials left.
      state.external = startBytes + 100_000;
    },
    SCAVENGE_AFTER_BYTES,
    (run) => state.deferred.push(run),
  );
  const runDeferred = () => {
    for (const run of state.deferred.splice(0)) run();
  };
  return { state, scavenger, runDeferred };
}

describe("DialScavenger", () => {
  it("leaves growth under SCAVENGE_AFTER_BYTES alone", () => {
    const { state, scavenger, runDeferred } = fakeScavenger();
    state.external += SCAVENGE_AFTER_BYTES - 1;
    scavenger.look();
    runDeferred();
    expect(state.scavenges).toBe(0);
  });

  it("scavenges once after the dial at hand when external memory grew SCAVENGE_AFTER_BYTES", () => {
    const { state, scavenger, runDeferred } = fakeScavenger();
    state.external += SCAVENGE_AFTER_BYTES;
    scavenger.look();
    expect(state.scavenges).toBe(0);
    // Dials before the deferred run ask for no second one.
    state.external += SCAVENGE_AFTER_BYTES;
    scavenger.look();
    expect(state.deferred).toHaveLength(1);
    runDeferred();
    expect(state.scavenges).toBe(1);
  });

  it("measures growth from what the scavenge left", () => {
    const { state, scavenger, runDeferred } = fakeScavenger();
    state.external += SCAVENGE_AFTER_BYTES;
    scavenger.look();
    runDeferred();
    const left = state.external;
    state.external = left + SCAVENGE_AFTER_BYTES - 1;
    scavenger.look();
    runDeferred();
    expect(state.scavenges).toBe(1);
    state.external = left + SCAVENGE_AFTER_BYTES;
    scavenger.look();
    runDeferred();
    expect(state.scavenges).toBe(2);
  });

  it("follows memory down when V8 collected by itself, and counts growth from there", () => {
    const { state, scavenger, runDeferred } = fakeScavenger();
    state.external -= 5_000_000;
    scavenger.look();
    state.external += SCAVENGE_AFTER_BYTES;
    scavenger.look();
    runDeferred();
    expect(state.scavenges).toBe(1);
  });

  it("frees dead ArrayBuffers a burst of dials left in this process", async () => {
    const scavenger = dialScavenger();
    const before = getHeapStatistics().external_memory;
    for (let i = 0; i < 512; i++) Buffer.alloc(16 * 1024); // 8 MiB of read buffers, all dead
    const grown = getHeapStatistics().external_memory - before;
    expect(grown).toBeGreaterThanOrEqual(SCAVENGE_AFTER_BYTES);
    scavenger.look();
    await new Promise((resolve) => setImmediate(resolve));
    // The deferred scavenge ran before this later setImmediate, and freed most of the burst.
    expect(getHeapStatistics().external_memory - before).toBeLessThan(grown / 2);
  });
});
