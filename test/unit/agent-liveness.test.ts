import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AgentLiveness, type LivenessTimes, type ProbeTurns } from "../../lib/server/core/agent-liveness.js";

const TIMES: LivenessTimes = { probeIntervalMs: 5_000, answerTimeoutMs: 2_000, deadAfterMs: 60_000 };

/** An agent whose probes are answered only when the test says so. */
function watched(times: LivenessTimes = TIMES) {
  const events: string[] = [];
  const waiting: Array<() => void> = [];
  const liveness = new AgentLiveness(times, {
    probe: (answered) => {
      events.push("probe");
      waiting.push(answered);
    },
    onResponsiveChange: (responsive) => events.push(responsive ? "responsive" : "unresponsive"),
    onDead: (silentMs) => events.push(`dead after ${silentMs}`),
  });
  const answer = () => {
    for (const a of waiting.splice(0)) a();
  };
  return { liveness, events, answer };
}

/**
 * Turns that come `wait(afterMs)` ms from now (0: at once), each on a timer of its own: what a
 * turn queue does for one agent, with the wait chosen by the test.
 */
function turns(wait: (afterMs: number) => number): ProbeTurns {
  return {
    take: (afterMs, run) => {
      const ms = wait(afterMs);
      if (ms <= 0) return null;
      const timer = setTimeout(run, ms);
      return () => clearTimeout(timer);
    },
  };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("AgentLiveness", () => {
  it("does not probe an agent that keeps talking", () => {
    const { liveness, events } = watched();
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(1_000);
      liveness.heard();
    }
    expect(events).toEqual([]);
    liveness.stop();
  });

  it("probes a silent agent and stays responsive while it answers", () => {
    const { liveness, events, answer } = watched();
    vi.advanceTimersByTime(5_000);
    expect(events).toEqual(["probe"]);
    vi.advanceTimersByTime(100);
    answer();
    vi.advanceTimersByTime(5_000);
    expect(events).toEqual(["probe", "probe"]);
    answer();
    expect(liveness.responsive).toBe(true);
    liveness.stop();
  });

  it("marks an agent unresponsive when a probe goes unanswered, and responsive on any sign of life", () => {
    const { liveness, events } = watched();
    vi.advanceTimersByTime(5_000 + 1_999);
    expect(liveness.responsive).toBe(true);
    vi.advanceTimersByTime(1);
    expect(liveness.responsive).toBe(false);
    expect(events).toEqual(["probe", "unresponsive"]);
    liveness.heard();
    expect(liveness.responsive).toBe(true);
    expect(events).toEqual(["probe", "unresponsive", "responsive"]);
    liveness.stop();
  });

  it("renews an unanswered probe each interval and declares the agent dead at the timeout", () => {
    const { events } = watched();
    vi.advanceTimersByTime(59_999);
    expect(events.filter((e) => e === "probe")).toHaveLength(11); // at 5 s, then every 5 s
    expect(events.filter((e) => e === "unresponsive")).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(events.at(-1)).toBe("dead after 60000");
    // Nothing after death.
    const n = events.length;
    vi.advanceTimersByTime(60_000);
    expect(events).toHaveLength(n);
  });

  it("accepts a late answer to an earlier probe as life", () => {
    const { liveness, events, answer } = watched();
    vi.advanceTimersByTime(5_000 + 2_000 + 5_000); // probe, unresponsive, second probe
    expect(events).toEqual(["probe", "unresponsive", "probe"]);
    answer();
    expect(liveness.responsive).toBe(true);
    liveness.stop();
  });

  it("never closes with deadAfterMs 0, and does nothing at all with probing off", () => {
    const never = watched({ ...TIMES, deadAfterMs: 0 });
    vi.advanceTimersByTime(600_000);
    expect(never.events.some((e) => e.startsWith("dead"))).toBe(false);
    never.liveness.stop();
    const off = watched({ probeIntervalMs: 0, answerTimeoutMs: 0, deadAfterMs: 0 });
    vi.advanceTimersByTime(600_000);
    expect(off.events).toEqual([]);
    expect(off.liveness.responsive).toBe(true);
  });

  it("stops: no probe or verdict after stop(), and an answer then changes nothing", () => {
    const { liveness, events, answer } = watched();
    vi.advanceTimersByTime(5_000);
    liveness.stop();
    vi.advanceTimersByTime(120_000);
    answer();
    expect(events).toEqual(["probe"]);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe("AgentLiveness and dials", () => {
  it("sends a probe with a dial to an agent that has been quiet, and finds a frozen one within the answer timeout", () => {
    const { liveness, events } = watched();
    vi.advanceTimersByTime(300); // quiet for longer than DIAL_PROBE_AFTER_SILENCE_MS
    liveness.dialSent();
    expect(events).toEqual(["probe"]);
    vi.advanceTimersByTime(2_000);
    expect(events).toEqual(["probe", "unresponsive"]);
    liveness.stop();
  });

  it("does not probe for dials to an agent heard a moment ago, nor twice while one probe is out", () => {
    const { liveness, events } = watched();
    vi.advanceTimersByTime(100);
    liveness.dialSent();
    expect(events).toEqual([]);
    vi.advanceTimersByTime(200);
    liveness.dialSent();
    liveness.dialSent();
    expect(events).toEqual(["probe"]);
    liveness.stop();
  });

  it("waits for its slot from the pacer, asks once, and is never written off unasked", () => {
    const slots: number[] = [];
    const { liveness, events, answer } = watched({
      ...TIMES,
      probeTurns: turns(() => {
        slots.push(Date.now());
        return 40_000; // a crowded instance: our turn is 40 s away
      }),
    });
    // Due at 5 s; its slot is at 45 s. Silent all along: no probe, and not dead either.
    vi.advanceTimersByTime(44_999);
    expect(events).toEqual([]);
    expect(slots).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(events).toEqual(["probe"]);
    expect(slots).toHaveLength(1);
    answer();
    liveness.stop();
  });

  it("is dead only once asked and silent for the liveness timeout", () => {
    const { liveness, events } = watched({ ...TIMES, probeTurns: turns(() => 0) });
    vi.advanceTimersByTime(5_000 + 2_000);
    expect(events).toEqual(["probe", "unresponsive"]);
    vi.advanceTimersByTime(60_000);
    expect(events.at(-1)).toMatch(/^dead after \d+$/);
    liveness.stop();
  });

  it("gives an agent the pacer asked late the rest of the timeout to answer, not only the answer timeout", () => {
    // A crowded instance: the turn comes 5 minutes after the agent fell silent, long past the
    // 60 s liveness timeout. An answer 3 s late (a loaded agent) must not cost the connection.
    let wait = 300_000;
    const { liveness, events, answer } = watched({
      ...TIMES,
      probeTurns: turns(() => {
        const w = wait;
        wait = 0;
        return w;
      }),
    });
    vi.advanceTimersByTime(305_000);
    expect(events).toEqual(["probe"]);
    vi.advanceTimersByTime(3_000);
    expect(events).toEqual(["probe", "unresponsive"]);
    answer();
    expect(events).toEqual(["probe", "unresponsive", "responsive"]);
    // Frozen after that: dead once asked and silent for the timeout (60 s, less one interval
    // of asking), not sooner.
    vi.advanceTimersByTime(54_000);
    expect(events.some((e) => e.startsWith("dead"))).toBe(false);
    vi.advanceTimersByTime(60_000);
    expect(events.at(-1)).toMatch(/^dead after \d+$/);
    liveness.stop();
  });

  it("writes off an agent asked late and never answering once it had the rest of the timeout", () => {
    let wait = 300_000;
    const { liveness, events } = watched({
      ...TIMES,
      probeTurns: turns(() => {
        const w = wait;
        wait = 0;
        return w;
      }),
    });
    vi.advanceTimersByTime(305_000 + 54_999);
    expect(events).toEqual([
      "probe",
      "unresponsive",
      "probe",
      "probe",
      "probe",
      "probe",
      "probe",
      "probe",
      "probe",
      "probe",
      "probe",
      "probe",
    ]);
    vi.advanceTimersByTime(1);
    expect(events.at(-1)).toMatch(/^dead after \d+$/);
    liveness.stop();
  });

  it("sleeps from an answered periodic probe until its next turn: one timer, no wake-up in between", () => {
    const asked: number[] = [];
    const { liveness, events, answer } = watched({
      ...TIMES,
      probeTurns: turns((afterMs) => {
        asked.push(afterMs);
        return afterMs;
      }),
    });
    vi.advanceTimersByTime(5_000);
    expect(events).toEqual(["probe"]);
    vi.advanceTimersByTime(10);
    answer();
    // The next turn is taken at the answer, no sooner than one interval on.
    expect(asked).toEqual([0, 5_000]);
    const woken = vi.getTimerCount();
    expect(woken).toBe(1);
    // Nothing runs between the answer and that turn (no check at the answer deadline, no second
    // wake-up to ask the pacer), and the probe then goes at once.
    vi.advanceTimersByTime(4_999);
    expect(events).toEqual(["probe"]);
    expect(asked).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(events).toEqual(["probe", "probe"]);
    liveness.stop();
  });

  it("does not take a turn for the answer to a probe that went with a dial", () => {
    const asked: number[] = [];
    const { liveness, events, answer } = watched({
      ...TIMES,
      probeTurns: turns((afterMs) => {
        asked.push(afterMs);
        return afterMs;
      }),
    });
    vi.advanceTimersByTime(300);
    liveness.dialSent();
    answer();
    expect(events).toEqual(["probe"]);
    expect(asked).toEqual([]);
    liveness.stop();
  });

  it("never makes the probe that goes with a dial wait", () => {
    const { liveness, events } = watched({ ...TIMES, probeTurns: turns(() => 60_000) });
    vi.advanceTimersByTime(1_000);
    liveness.dialSent();
    expect(events).toEqual(["probe"]);
    liveness.stop();
  });
});
