import { describe, expect, it } from "vitest";
import { Backoff } from "../../lib/util/backoff.js";

/** A random source that replays `values`, then repeats the last one. */
const sequence = (...values: number[]) => {
  let i = 0;
  return () => values[Math.min(i++, values.length - 1)]!;
};

describe("Backoff", () => {
  it("doubles the window from base up to cap", () => {
    const b = new Backoff({ baseMs: 1_000, capMs: 10_000, random: () => 0.999_999 });
    const delays = Array.from({ length: 7 }, () => b.next());
    expect(delays).toEqual([999, 1_999, 3_999, 7_999, 9_999, 9_999, 9_999]);
  });

  it("draws each delay uniformly below the window (full jitter)", () => {
    const b = new Backoff({ baseMs: 1_000, capMs: 10_000, random: sequence(0, 0.5, 0.25) });
    expect(b.next()).toBe(0);
    expect(b.next()).toBe(1_000); // 0.5 of 2s
    expect(b.next()).toBe(1_000); // 0.25 of 4s
  });

  it("starts from the base window again after reset", () => {
    const b = new Backoff({ baseMs: 200, capMs: 5_000, random: () => 0.5 });
    b.next();
    b.next();
    b.next();
    expect(b.ceilingMs).toBe(1_600);
    b.reset();
    expect(b.ceilingMs).toBe(200);
    expect(b.next()).toBe(100);
  });

  it("never exceeds the cap, however long it fails", () => {
    const b = new Backoff({ baseMs: 1, capMs: 10_000, random: () => 0.999_999_999 });
    for (let i = 0; i < 2_000; i++) expect(b.next()).toBeLessThan(10_000);
    expect(b.ceilingMs).toBe(10_000);
  });

  it("allows base equal to cap, and refuses nonsense", () => {
    expect(new Backoff({ baseMs: 500, capMs: 500, random: () => 0.5 }).next()).toBe(250);
    expect(() => new Backoff({ baseMs: 0, capMs: 1 })).toThrow(RangeError);
    expect(() => new Backoff({ baseMs: 10, capMs: 5 })).toThrow(RangeError);
  });
});
