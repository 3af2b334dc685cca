/**
 * Whether an agent stream is still answering, told apart from whether it is still connected.
 *
 * A stopped agent (SIGSTOP, a hung node, a partitioned network that drops instead of resetting)
 * keeps its TCP connection, so nothing closes it, and before this every dial chosen for it
 * waited for the whole dial timeout. Keepalive does not help: its interval (an hour by default,
 * as upstream's) is sized for idle connections, not for liveness.
 *
 * The rule: anything heard from the agent (a packet, or the answer to a probe) proves it alive.
 * When it has been silent for `probeIntervalMs` it is probed (an HTTP/2 or kgw-tunnel/1 PING,
 * answered below the packet layer, so a busy or paused stream still answers). No answer within
 * `answerTimeoutMs` makes it *unresponsive*: no new dials are sent to it, but its open tunnels
 * stay, since a pause of a few seconds (GC, CPU starvation, a live migration) is not a death.
 * It is responsive again the moment anything arrives. Silent for `deadAfterMs` with a probe
 * unanswered, it is *dead*: the stream is closed and its tunnels end. (Silence alone is not
 * enough: with many idle agents the probe budget may ask an agent less often than that. Once
 * asked, an agent has `deadAfterMs - probeIntervalMs` to answer, as long as an agent asked on time
 * has: one the pacer asked minutes late is not written off for an answer a few seconds slow.)
 *
 * A dial is a question too: when one is sent to an agent that has been quiet for a moment and no
 * probe is out, a probe goes with it, so a frozen agent is found within `answerTimeoutMs` of the
 * first dial it fails to take, not at the next periodic probe.
 */

import { DIAL_PROBE_AFTER_SILENCE_MS } from "../durations.js";

export interface LivenessTimes {
  /** A silent agent is probed this often; 0 disables liveness tracking altogether. */
  probeIntervalMs: number;
  /** How long a probe may go unanswered before the agent counts as unresponsive. */
  answerTimeoutMs: number;
  /** How long an agent may stay silent before its stream is closed; 0 never closes. */
  deadAfterMs: number;
  /**
   * When periodic probes may go: turns every agent of the instance shares, handed out at a fixed
   * rate (IDLE_PROBES_PER_SECOND) and run in batches on one timer (lib/transport/turn-queue.ts),
   * so idle agents cost a bounded number of probes, and of wake-ups, a second however many there
   * are: past what the rate covers, each is simply asked less often. Probes that go with a dial
   * never wait. Absent: at once, each agent on its own timer.
   */
  probeTurns?: ProbeTurns;
}

/** The instance's periodic-probe turns (`TurnQueue`). */
export interface ProbeTurns {
  /**
   * The next turn no sooner than `afterMs` from now. Null: the turn is now, go at once (`run` is
   * not called). Otherwise `run` is called at the turn unless the function returned cancels it.
   */
  take(afterMs: number, run: () => void): (() => void) | null;
}

export interface LivenessHooks {
  /** Sends a probe; calls `answered` when (if) the peer answers. */
  probe(answered: () => void): void;
  /** The agent stopped answering, or started again. */
  onResponsiveChange(responsive: boolean): void;
  /** Silent for `deadAfterMs`. */
  onDead(silentMs: number): void;
}

export class AgentLiveness {
  private lastHeard = Date.now();
  private probeSentAt: number | null = null;
  /** When the first probe still unanswered went out (probeSentAt is the latest renewal). */
  private askedSince: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  /** Cancels the turn this agent waits for in the instance's queue (instead of a timer). */
  private cancelTurn: (() => void) | null = null;
  private stopped = false;
  /** A turn is held: the next due check probes without asking for another. */
  private slotReserved = false;
  /** The probe out is a periodic one (its turn from the pacer), not one that went with a dial. */
  private turnProbe = false;
  responsive = true;

  constructor(
    private readonly times: LivenessTimes,
    private readonly hooks: LivenessHooks,
  ) {
    if (times.probeIntervalMs > 0) this.schedule();
  }

  /** When the agent was last heard from (ms since the epoch): the status API's "last seen". */
  get lastHeardAt(): number {
    return this.lastHeard;
  }

  /** Something arrived from the agent. Called per packet: keep it cheap. */
  heard(): void {
    const answeredTurn = this.probeSentAt !== null && this.turnProbe;
    this.lastHeard = Date.now();
    this.probeSentAt = null;
    this.askedSince = null;
    if (!this.responsive) {
      this.responsive = true;
      this.hooks.onResponsiveChange(true);
    }
    if (answeredTurn && !this.stopped) this.nextTurn();
  }

  /** A dial was sent to the agent: ask it now if it has been quiet (see above). */
  dialSent(): void {
    if (this.stopped || this.times.probeIntervalMs <= 0 || this.probeSentAt !== null) return;
    if (Date.now() - this.lastHeard < DIAL_PROBE_AFTER_SILENCE_MS) return;
    this.sendProbe(Date.now(), false);
    this.clearWake();
    this.schedule();
  }

  /** How long the agent has been silent. */
  get silentMs(): number {
    return Date.now() - this.lastHeard;
  }

  stop(): void {
    this.stopped = true;
    this.clearWake();
  }

  private schedule(): void {
    const { probeIntervalMs, answerTimeoutMs, deadAfterMs } = this.times;
    const due: number[] = [];
    if (this.probeSentAt === null) due.push(this.lastHeard + probeIntervalMs);
    else {
      due.push(this.probeSentAt + probeIntervalMs);
      if (this.responsive) due.push(this.probeSentAt + answerTimeoutMs);
    }
    if (deadAfterMs > 0 && this.probeSentAt !== null && this.askedSince !== null) {
      due.push(
        Math.max(
          this.lastHeard + deadAfterMs,
          this.probeSentAt + answerTimeoutMs,
          this.askedSince + this.answerWindowMs(),
        ),
      );
    }
    this.timer = setTimeout(() => this.check(), Math.max(1, Math.min(...due) - Date.now()));
    this.timer.unref();
  }

  private check(): void {
    if (this.stopped) return;
    const now = Date.now();
    const silent = now - this.lastHeard;
    const { probeIntervalMs, answerTimeoutMs, deadAfterMs } = this.times;
    const unanswered = this.probeSentAt !== null && now - this.probeSentAt >= answerTimeoutMs;
    const askedLongEnough = this.askedSince !== null && now - this.askedSince >= this.answerWindowMs();
    if (deadAfterMs > 0 && silent >= deadAfterMs && unanswered && askedLongEnough) {
      this.stop();
      this.hooks.onDead(silent);
      return;
    }
    if (this.probeSentAt !== null && now - this.probeSentAt >= answerTimeoutMs && this.responsive) {
      this.responsive = false;
      this.hooks.onResponsiveChange(false);
    }
    // One probe outstanding at a time; an unanswered one is renewed each interval, so a peer
    // that lost one PING is not written off for it.
    if (
      silent >= probeIntervalMs &&
      (this.probeSentAt === null || now - this.probeSentAt >= probeIntervalMs)
    ) {
      if (!this.slotReserved && this.times.probeTurns) {
        // Our turn comes later: the queue wakes us then, to probe without asking again.
        this.cancelTurn = this.times.probeTurns.take(0, this.onTurn);
        if (this.cancelTurn !== null) {
          this.slotReserved = true;
          return;
        }
      }
      this.slotReserved = false;
      this.sendProbe(now, true);
    }
    this.schedule();
  }

  /**
   * An idle agent answered its periodic probe: nothing is due before its next one, so its next
   * turn is reserved now and it sleeps until then, with no timer of its own. Before, it woke
   * twice more (at the answer deadline, to find the answer in, and at the probe interval, to
   * ask the pacer): each wake-up of the process costs far more than the check it runs
   * (docs/PERFORMANCE.md, idle CPU). Only periodic probes do this: answers to probes that went
   * with dials would take turns busy agents seldom need and push idle agents' turns back.
   */
  private nextTurn(): void {
    this.clearWake();
    const turns = this.times.probeTurns;
    if (turns === undefined) {
      this.slotReserved = false;
      this.timer = setTimeout(() => this.check(), this.times.probeIntervalMs);
      this.timer.unref();
      return;
    }
    this.slotReserved = true;
    this.cancelTurn = turns.take(this.times.probeIntervalMs, this.onTurn);
    // A turn "now" cannot come a whole interval ahead; if it did, check() sees what is due.
    if (this.cancelTurn === null) this.check();
  }

  private readonly onTurn = (): void => {
    this.cancelTurn = null;
    this.check();
  };

  private clearWake(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.cancelTurn?.();
    this.cancelTurn = null;
  }

  /** How long an asked agent may take to answer before it is dead (see the top of the file). */
  private answerWindowMs(): number {
    const { probeIntervalMs, answerTimeoutMs, deadAfterMs } = this.times;
    return Math.max(answerTimeoutMs, deadAfterMs - probeIntervalMs);
  }

  private sendProbe(now: number, turn: boolean): void {
    this.turnProbe = turn;
    this.probeSentAt = now;
    this.askedSince ??= now;
    // Any answer proves life, a late one to an earlier probe included.
    this.hooks.probe(() => {
      if (!this.stopped) this.heard();
    });
  }
}
