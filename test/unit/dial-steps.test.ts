/** The dial path's step accounting (lib/observability/dial-steps.ts), on an injected clock. */
import { describe, expect, it } from "vitest";
import { afterStep, DIAL_STEPS, type DialStep, DialStepClock } from "../../lib/observability/dial-steps.js";

/** A clock the test moves, and what the dial's clock recorded. */
function harness(startMs = 1000) {
  let t = startMs;
  const recorded: [DialStep, number][] = [];
  const clock = new DialStepClock(
    (step, seconds) => recorded.push([step, seconds]),
    () => t,
  );
  return {
    clock,
    recorded,
    advance: (ms: number) => {
      t += ms;
    },
  };
}

describe("a dial's step clock", () => {
  it("records each step as the time since the previous mark, and the steps add up to the whole", () => {
    const h = harness();
    const costs = [0.05, 0.01, 0.02, 0.004, 0.3, 1.5, 0.2]; // ms, one per step
    DIAL_STEPS.forEach((step, i) => {
      h.advance(costs[i]!);
      h.clock.mark(step);
    });
    expect(h.recorded.map(([s]) => s)).toEqual([...DIAL_STEPS]);
    for (const [i, [, seconds]] of h.recorded.entries()) expect(seconds).toBeCloseTo(costs[i]! / 1000, 12);
    const total = h.recorded.reduce((a, [, s]) => a + s, 0);
    expect(total).toBeCloseTo(costs.reduce((a, c) => a + c, 0) / 1000, 12);
  });

  it("starts when it is made, not at the first mark", () => {
    const h = harness();
    h.advance(3);
    h.clock.mark("identity");
    expect(h.recorded).toEqual([["identity", 0.003]]);
  });

  it("records a step once: a tunnel's later deliveries do not count as first bytes", () => {
    const h = harness();
    h.advance(1);
    h.clock.mark("agent");
    h.advance(2);
    h.clock.mark("first-byte");
    h.advance(50);
    h.clock.mark("first-byte");
    h.clock.mark("first-byte");
    expect(h.recorded).toEqual([
      ["agent", 0.001],
      ["first-byte", 0.002],
    ]);
  });

  it("records only the steps a refused dial finished", () => {
    const h = harness();
    h.advance(1);
    h.clock.mark("identity");
    h.advance(1);
    h.clock.mark("audit");
    // The policy refused: authorizeDial threw, so "policy" was never marked.
    expect(h.recorded.map(([s]) => s)).toEqual(["identity", "audit"]);
  });

  it("afterStep marks the step and passes the value through; without a clock it only passes it", () => {
    const h = harness();
    h.advance(2);
    expect(afterStep(h.clock, "policy", "allowed")).toBe("allowed");
    expect(h.recorded).toEqual([["policy", 0.002]]);
    expect(afterStep(undefined, "policy", 42)).toBe(42);
  });
});
