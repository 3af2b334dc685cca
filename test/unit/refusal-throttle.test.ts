import { describe, expect, it } from "vitest";
import { RefusalThrottle } from "../../lib/transport/refusal-throttle.js";

function throttle(over: Partial<ConstructorParameters<typeof RefusalThrottle>[0]> = {}) {
  let t = 0;
  const th = new RefusalThrottle({
    threshold: 5,
    handshakesPerSecond: 2,
    cooldownMs: 10_000,
    maxSources: 100,
    now: () => t,
    ...over,
  });
  return { th, advance: (ms: number) => (t += ms) };
}

/** How many of `n` connections from `source` are admitted now. */
const admitted = (th: RefusalThrottle, source: string, n: number) =>
  Array.from({ length: n }, () => th.admit(source)).filter(Boolean).length;

describe("RefusalThrottle", () => {
  it("admits a source refused up to the threshold, and throttles it past it", () => {
    const { th } = throttle();
    for (let i = 0; i < 5; i++) th.refused("10.0.0.1");
    expect(admitted(th, "10.0.0.1", 10)).toBe(10);
    th.refused("10.0.0.1");
    // A throttled source starts with no allowance: its very next connection waits its turn.
    expect(admitted(th, "10.0.0.1", 10)).toBe(0);
    expect(th.throttledCount()).toBe(1);
  });

  it("lets a throttled source start its rate of handshakes a second, and no more", () => {
    const { th, advance } = throttle();
    for (let i = 0; i < 6; i++) th.refused("10.0.0.1");
    advance(500);
    expect(admitted(th, "10.0.0.1", 10)).toBe(1);
    advance(1_000);
    expect(admitted(th, "10.0.0.1", 10)).toBe(2);
    advance(5_000); // the allowance is capped at one second's worth
    expect(admitted(th, "10.0.0.1", 10)).toBe(2);
  });

  it("keeps other sources out of it", () => {
    const { th } = throttle();
    for (let i = 0; i < 50; i++) th.refused("10.0.0.1");
    expect(admitted(th, "10.0.0.2", 10)).toBe(10);
  });

  it("counts a rate, not a total: refusals spread thinner than the threshold never throttle", () => {
    const { th, advance } = throttle();
    for (let i = 0; i < 100; i++) {
      th.refused("10.0.0.1");
      advance(250); // 4 a second against a threshold of 5
    }
    expect(th.throttledCount()).toBe(0);
    expect(admitted(th, "10.0.0.1", 10)).toBe(10);
  });

  it("stays throttled while refusals keep coming, and frees the source a cooldown after the last", () => {
    const { th, advance } = throttle();
    for (let i = 0; i < 6; i++) th.refused("10.0.0.1");
    for (let s = 0; s < 20; s++) {
      advance(1_000);
      // What it may still start is refused again (its tenant is still at its quota).
      const n = admitted(th, "10.0.0.1", 10);
      expect(n).toBe(2);
      for (let i = 0; i < n; i++) th.refused("10.0.0.1");
    }
    advance(9_999);
    expect(th.throttledCount()).toBe(1);
    advance(1);
    expect(th.throttledCount()).toBe(0);
    expect(admitted(th, "10.0.0.1", 10)).toBe(10);
  });

  it("does nothing when off", () => {
    const { th } = throttle({ threshold: 0 });
    for (let i = 0; i < 1_000; i++) th.refused("10.0.0.1");
    expect(th.enabled).toBe(false);
    expect(admitted(th, "10.0.0.1", 10)).toBe(10);
    expect(th.trackedCount).toBe(0);
  });

  it("remembers a bounded number of sources, forgetting idle ones first and failing open", () => {
    const { th, advance } = throttle({ maxSources: 3 });
    for (const s of ["a", "b", "c"]) for (let i = 0; i < 6; i++) th.refused(s);
    th.refused("d");
    expect(th.trackedCount).toBe(3);
    expect(th.untracked).toBe(1);
    expect(th.admit("d")).toBe(true);
    // Still throttled a few seconds later: none of them is forgotten.
    advance(3_000);
    th.refused("e");
    expect(th.trackedCount).toBe(3);
    expect(admitted(th, "a", 10)).toBe(2);
    // Once their cooldown is over and their refusals have drained, they make room.
    advance(10_000);
    th.refused("e");
    expect(th.trackedCount).toBe(1);
  });
});
