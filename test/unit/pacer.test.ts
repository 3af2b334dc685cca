import { describe, expect, it } from "vitest";
import { Pacer } from "../../lib/transport/pacer.js";

describe("Pacer", () => {
  it("spaces slots 1/rate apart, and gives an idle pacer's next slot at once", () => {
    let t = 1_000;
    const p = new Pacer(200, () => t);
    expect([p.reserve(), p.reserve(), p.reserve()]).toEqual([0, 5, 10]);
    t += 1_000; // idle since: the backlog is gone
    expect(p.reserve()).toBe(0);
    // 10,000 callers at once: the last waits 50 s, and each is told once.
    const waits = Array.from({ length: 10_000 }, () => p.reserve());
    expect(waits.at(-1)).toBeCloseTo(50_000, 0);
  });

  it("reserves a slot no sooner than asked, behind the slots already given", () => {
    let t = 1_000;
    const p = new Pacer(10, () => t);
    expect(p.reserve(5_000)).toBe(5_000);
    expect(p.reserve(5_000)).toBe(5_100);
    t += 10_000;
    expect(p.reserve()).toBe(0);
  });

  it("refuses a rate that is not positive", () => {
    expect(() => new Pacer(0)).toThrow(RangeError);
  });
});
