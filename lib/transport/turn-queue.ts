/**
 * Turns from a Pacer, run in batches on one timer for all callers.
 *
 * Why: on a machine like Fargate's (a Firecracker VM) each wake-up of the process costs far more
 * than the work it does, and an instance holding thousands of idle agents spends its idle CPU on
 * wake-ups: with a timer per agent, the pacer's 30 periodic probes a second were 30 timer
 * wake-ups, and 30 answers read one by one. Here a caller whose turn is later is queued instead of
 * setting a timer of its own, and one timer runs every turn that has come, at most once per
 * `batchMs`: the probes of a second go out together, their answers come back together, and the
 * process wakes about once a second for them. The price: a turn may run up to `batchMs` late.
 *
 * The pacer's slots only grow (each is at least 1/rate after the one before), so the queue is a
 * FIFO and nothing is ever sorted. A cancelled turn keeps its slot (as a cleared timer did) and is
 * skipped; with no live turn left the timer is cleared, so nothing outlives the callers.
 */
import { Pacer } from "./pacer.js";

interface Turn {
  /** When the turn comes (ms, the clock's). */
  at: number;
  /** null once run or cancelled. */
  run: (() => void) | null;
}

export class TurnQueue {
  private readonly pacer: Pacer;
  private queue: Turn[] = [];
  private head = 0;
  /** Turns queued and neither run nor cancelled. */
  private live = 0;
  private timer: NodeJS.Timeout | undefined;
  /** What the timer was set for: the turns due by then run when it fires, even a moment early. */
  private armedFor = Number.NEGATIVE_INFINITY;
  private lastRunAt = Number.NEGATIVE_INFINITY;
  private running = false;

  constructor(
    perSecond: number,
    /** Turns that have come run together, at most once per this many ms. */
    private readonly batchMs: number,
    private readonly now: () => number = () => Date.now(),
  ) {
    if (!(batchMs >= 0)) throw new RangeError(`turn batch must not be negative: ${batchMs}`);
    this.pacer = new Pacer(perSecond, now);
  }

  /**
   * Takes the next turn no sooner than `afterMs` from now. Null: the turn is now (the pacer was
   * idle and `afterMs` is 0), go at once; `run` is not called. Otherwise `run` is called at the
   * turn, up to `batchMs` late, unless the function returned cancels it first.
   */
  take(afterMs: number, run: () => void): (() => void) | null {
    const wait = this.pacer.reserve(afterMs);
    if (wait <= 0) return null;
    const turn: Turn = { at: this.now() + wait, run };
    this.queue.push(turn);
    this.live++;
    if (this.timer === undefined && !this.running) this.arm();
    return () => {
      if (turn.run === null) return;
      turn.run = null;
      if (--this.live === 0) this.clear();
    };
  }

  /** Turns waiting, neither run nor cancelled (the tests read it). */
  get waiting(): number {
    return this.live;
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    const now = this.now();
    // A timer may fire a fraction of a millisecond before the clock shows its time.
    const due = Math.max(now, this.armedFor);
    this.lastRunAt = now;
    this.running = true;
    try {
      while (this.head < this.queue.length && this.queue[this.head]!.at <= due) {
        const turn = this.queue[this.head++]!;
        const run = turn.run;
        if (run === null) continue;
        turn.run = null;
        this.live--;
        run();
      }
    } finally {
      this.running = false;
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
    if (this.live === 0) this.clear();
    else this.arm();
  };

  private arm(): void {
    while (this.head < this.queue.length && this.queue[this.head]!.run === null) this.head++;
    const next = this.queue[this.head];
    if (next === undefined) return;
    const at = Math.max(next.at, this.lastRunAt + this.batchMs);
    this.armedFor = at;
    this.timer = setTimeout(this.fire, Math.max(1, at - this.now()));
    this.timer.unref();
  }

  private clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.queue = [];
    this.head = 0;
  }
}
