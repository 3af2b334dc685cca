import { getHeapStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { DialScavenger } from "../../lib/transport/dial-scavenger.js";
import { minorGc, SCAVENGE_AFTER_BYTES } from "../../lib/transport/scavenge-pacer.js";

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

  // That a scavenge frees such buffers is minorGc's test (scavenge-pacer.test.ts); here, that
  // V8's own counter, the one `kgw agent` reads, sees them pile up.
  it("calls for a scavenge as dead read buffers pile up, read from V8's external-memory counter", () => {
    let due: (() => void) | undefined;
    const scavenger = new DialScavenger(
      () => getHeapStatistics().external_memory,
      minorGc(),
      SCAVENGE_AFTER_BYTES,
      (run) => {
        due = run;
      },
    );
    // Each dial leaves dead 16 KiB read buffers behind. V8's counter adds new buffers at once but
    // takes freed ones off only at a later collection, so the first 4 MiB may net against buffers
    // freed before: a loop, not a fixed burst.
    let allocated = 0;
    while (!due && allocated < 64 * 1024 * 1024) {
      Buffer.alloc(16 * 1024);
      allocated += 16 * 1024;
      scavenger.look();
    }
    expect(due).toBeDefined();
    expect(allocated).toBeGreaterThanOrEqual(SCAVENGE_AFTER_BYTES);
    due?.();
  });
});
