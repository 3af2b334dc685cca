/**
 * Where a CONNECT dial's time goes inside the server, step by step (issue 26's cost table):
 * opt-in (--dial-step-metrics), for profiling the dial path, never on in production. Off, nothing
 * here runs: the frontend holds no clock and every mark is an optional call on undefined.
 *
 * A dial's clock starts when its CONNECT request head has been read (the connection's TCP accept
 * and TLS handshake are the client's to time: bench/scenarios/dial-steps.ts) and each mark
 * records the time since the previous one under the step that just ended, so the steps of a dial
 * add up to its time in the server, from the head read to its first byte written to the caller.
 * A dial that ends early (refused, failed) records the steps it finished and no others.
 */

/** The steps, in the order a dial goes through them (each named for what ends at its mark). */
export const DIAL_STEPS = [
  /** The caller's credential read and its tenant found (caller-front.ts). */
  "identity",
  /** The dial's audit tracker made: its id, its record's start (gateway.ts, DialTracker). */
  "audit",
  /** The tenant's egress policy asked (gateway-policy.ts authorizeDial). */
  "policy",
  /** A tunnel slot and dial token taken from the tenant's quotas. */
  "quota",
  /** An agent chosen (here or, in a fleet, on a peer) and the dial request sent to it. */
  "routing",
  /** The agent's answer: it dialled the backend (DIAL_RSP), 200 written to the caller. */
  "agent",
  /**
   * The backend's first bytes handed to the caller's socket. A CONNECT caller speaks first, so this
   * holds its own turn too: the 200 reaching it, its request coming back, the agent's round trip.
   */
  "first-byte",
] as const;

export type DialStep = (typeof DIAL_STEPS)[number];

/** Marks the end of each step of one dial. */
export interface DialSteps {
  mark(step: DialStep): void;
}

/** Where a finished step's duration goes (a histogram per step: lib/metrics/dial-step-metrics.ts). */
export type DialStepRecorder = (step: DialStep, seconds: number) => void;

/** Milliseconds from a monotonic clock (performance.now); injected by tests. */
export type MonotonicMs = () => number;

/**
 * One dial's clock. A step is recorded once, at its first mark: a CONNECT tunnel's later data
 * (every delivery marks "first-byte") costs a set lookup and nothing else.
 */
export class DialStepClock implements DialSteps {
  private last: number;
  private readonly done = new Set<DialStep>();

  constructor(
    private readonly record: DialStepRecorder,
    private readonly now: MonotonicMs = () => performance.now(),
  ) {
    this.last = now();
  }

  mark(step: DialStep): void {
    if (this.done.has(step)) return;
    this.done.add(step);
    const t = this.now();
    this.record(step, (t - this.last) / 1000);
    this.last = t;
  }
}

/** Starts a clock per dial; absent when --dial-step-metrics is off. */
export type DialStepsFactory = () => DialSteps;

/** `value`, once `step` is marked on `steps` (when there are any): a mark inside an expression. */
export function afterStep<T>(steps: DialSteps | undefined, step: DialStep, value: T): T {
  steps?.mark(step);
  return value;
}
