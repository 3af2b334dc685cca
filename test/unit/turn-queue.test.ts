import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AgentLiveness } from "../../lib/server/core/agent-liveness.js";
import { TurnQueue } from "../../lib/transport/turn-queue.js";

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Takes `n` turns; returns when each ran (ms from `t0`), in the order taken. */
function takeMany(
  q: TurnQueue,
  n: number,
  afterMs = 0,
): { ranAt: (number | null)[]; cancels: (() => void)[] } {
  const t0 = Date.now();
  const ranAt: (number | null)[] = [];
  const cancels: (() => void)[] = [];
  for (let i = 0; i < n; i++) {
    ranAt.push(null);
    const cancel = q.take(afterMs, () => {
      ranAt[i] = Date.now() - t0;
    });
    if (cancel === null) ranAt[i] = 0;
    else cancels.push(cancel);
  }
  return { ranAt, cancels };
}

describe("TurnQueue", () => {
  it("gives an idle queue's turn at once, and the next one later", () => {
    const q = new TurnQueue(10, 1_000);
    const run = vi.fn();
    expect(q.take(0, run)).toBeNull();
    expect(q.take(0, run)).not.toBeNull();
    expect(run).not.toHaveBeenCalled();
    vi.advanceTimersByTime(100);
    expect(run).toHaveBeenCalledOnce();
  });

  it("runs the turns that came together, one timer for all, no turn early and none a batch late", () => {
    const q = new TurnQueue(30, 1_000);
    const { ranAt } = takeMany(q, 95);
    expect(ranAt[0]).toBe(0);
    expect(vi.getTimerCount()).toBe(1);
    for (let t = 0; t < 5_000; t++) {
      vi.advanceTimersByTime(1);
      expect(vi.getTimerCount()).toBeLessThanOrEqual(1);
    }
    expect(ranAt.every((at) => at !== null)).toBe(true);
    // Turns run at one wake-up share its time (the clock does not move while they run).
    const wakeUps = new Set(ranAt.slice(1));
    // Slot i is i/30 s from now: never run before it, never a whole batch after it.
    for (const [i, at] of ranAt.entries()) {
      const slot = (i * 1_000) / 30;
      expect(at!).toBeGreaterThanOrEqual(Math.floor(slot));
      expect(at! - slot).toBeLessThanOrEqual(1_000);
    }
    // 94 turns after the first in about three seconds: five wake-ups (the first turn queued
    // alone at its slot, then one a second), not 94.
    expect(wakeUps.size).toBeLessThanOrEqual(5);
    // Never more than a batch's worth (the rate × the batch) at one wake-up.
    for (const w of wakeUps) expect(ranAt.filter((at) => at === w).length).toBeLessThanOrEqual(31);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("waits at least afterMs, and keeps the rate behind a turn reserved ahead", () => {
    const q = new TurnQueue(10, 1_000);
    const { ranAt } = takeMany(q, 3, 5_000);
    vi.advanceTimersByTime(4_999);
    expect(ranAt).toEqual([null, null, null]);
    vi.advanceTimersByTime(1_500);
    expect(ranAt).toEqual([5_000, 6_000, 6_000]);
  });

  it("never runs a cancelled turn, and clears its timer once no turn is left", () => {
    const q = new TurnQueue(30, 1_000);
    const { ranAt, cancels } = takeMany(q, 10);
    // The first turn went at once (no cancel): cancels[3] is the fifth turn's.
    cancels[3]!();
    cancels[3]!(); // twice changes nothing
    vi.advanceTimersByTime(2_000);
    expect(ranAt.filter((at) => at === null)).toHaveLength(1);
    expect(ranAt[4]).toBeNull();
    const later = takeMany(q, 5, 10_000);
    expect(q.waiting).toBe(5);
    for (const c of later.cancels) c();
    expect(q.waiting).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("queues a turn taken while turns run, behind the batch, on the same timer", () => {
    const q = new TurnQueue(30, 1_000);
    q.take(0, () => {});
    let inner: number | null = null;
    const t0 = Date.now();
    q.take(0, () => {
      q.take(0, () => {
        inner = Date.now() - t0;
      });
      expect(vi.getTimerCount()).toBe(0);
    });
    vi.advanceTimersByTime(34);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(1_100);
    // Its slot is 67 ms on, but the batch after the one that took it is a second later.
    expect(inner).toBeGreaterThanOrEqual(1_000);
    expect(inner).toBeLessThanOrEqual(1_034);
  });

  it("refuses a negative batch", () => {
    expect(() => new TurnQueue(30, -1)).toThrow(RangeError);
  });
});

describe("idle agents on one TurnQueue", () => {
  it("are probed in batches: one wake-up a second for all, each agent still asked in its turn", () => {
    const q = new TurnQueue(30, 1_000);
    const times = { probeIntervalMs: 5_000, answerTimeoutMs: 2_000, deadAfterMs: 60_000, probeTurns: q };
    const probedAt: number[][] = [];
    const agents = Array.from({ length: 300 }, (_, i) => {
      probedAt[i] = [];
      return new AgentLiveness(times, {
        // Answered at once, as an idle agent does.
        probe: (answered) => {
          probedAt[i]!.push(Date.now());
          queueMicrotask(answered);
        },
        onResponsiveChange: () => {},
        onDead: () => {},
      });
    });
    const t0 = Date.now();
    vi.advanceTimersByTime(40_000);
    const all = probedAt.flat().filter((at) => at >= t0 + 20_000);
    // 300 agents asked every 5 s would be 60 a second; the budget is 30.
    expect(all.length).toBeGreaterThan(0);
    expect(all.length).toBeLessThanOrEqual(30 * 20 + 30);
    // Every agent asked, within the 300 / 30 = 10 s the budget covers them in (and a batch).
    for (const list of probedAt) {
      const gaps = list.slice(1).map((at, k) => at - list[k]!);
      expect(Math.max(...gaps)).toBeLessThanOrEqual(11_100);
    }
    // About one wake-up a second sends them: probes sent at one wake-up share its time.
    expect(new Set(all).size).toBeLessThanOrEqual(21);
    for (const a of agents) a.stop();
    expect(q.waiting).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
