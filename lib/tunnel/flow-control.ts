/**
 * Per-connection flow control for agent streams whose two ends are both ours.
 *
 * Upstream multiplexes every connection of an agent on one gRPC stream with no flow control of
 * its own, so a receiver whose consumer is slow can only stop reading the whole stream: one
 * stalled reader stalls every connection of that agent (head-of-line blocking). When both ends
 * are ours they agree, through stream metadata, to credits instead: each side may have at most
 * CONNECTION_WINDOW_BYTES of a connection's data unconsumed at the other side, and the receiver
 * returns credit (a KGW_CREDIT packet) as it hands bytes on. A slow consumer then stops only its
 * own connection's sender; the stream keeps flowing for everyone else. An upstream peer never
 * offers or accepts the extension, and never sees a KGW_CREDIT packet.
 */

/** Metadata key of the offer (agent → server) and the acceptance (server → agent). */
export const FLOW_CONTROL_HEADER = "kgw-flow-control";
export const CREDIT_FLOW_V1 = "credit-v1";

export type FlowMode = "upstream" | "credit";

/**
 * credit-v1's initial window: unconsumed bytes a sender may have in flight per connection and
 * direction before any credit came back. Fixed by the protocol, so both ends agree on it without
 * saying so.
 */
export const CONNECTION_WINDOW_BYTES = 2 * 1024 * 1024;

/**
 * The window our receivers actually grant, by sending the difference as credit as soon as the
 * connection is established, or on the server once it carries data (OPEN_WINDOW_AFTER_BYTES; a
 * peer that grants only the initial window still works). Sized for
 * WAN round trips: a window per round trip is ~190 MB/s per connection at 22 ms RTT, where the
 * initial 2 MiB measured 76 MB/s. It is also what one stalled consumer can hold in memory at
 * the receiver, so it is a per-connection bound, not a shared one.
 */
export const RECEIVE_WINDOW_BYTES = 4 * 1024 * 1024;

/**
 * The agent's receive window (bytes towards a backend, "upload"): larger, because what a stalled
 * backend holds there is in the tenant's own agent, not in the shared gateway. As large as the
 * HTTP/2 stream window the agent grants its server (HTTP2_STREAM_WINDOW_BYTES) and the most a
 * window grows to (MAX_RECEIVE_WINDOW_BYTES), from the start: a round trip's bytes are not all
 * that is in flight, the socket buffers on the way hold megabytes more, and a window-bound
 * sender behind them arrives as a steady stream, not as the bursts and pauses that make a window
 * grow. 8 MiB held 20 ms uploads below upstream's (docs/PERFORMANCE.md, fourth pass), whose
 * HTTP/2 windows grow to 16 MiB.
 */
export const AGENT_RECEIVE_WINDOW_BYTES = 16 * 1024 * 1024;

/**
 * Largest DATA payload a sender puts in one packet in credit mode. Larger writes are split
 * (views, not copies), so a receiver can bound overshoot: the sender stops when its credit is
 * used up, which is at most one packet late (`ConnectionCredit.write`).
 */
export const MAX_DATA_PACKET_BYTES = 256 * 1024;

/** Credit is returned in batches of at least this much, to keep KGW_CREDIT packets rare. */
export const CREDIT_BATCH_BYTES = CONNECTION_WINDOW_BYTES / 8;

/**
 * How far a receiver lets a connection's window grow when the window, not the consumer, is what
 * holds the sender back (see `ConnectionCredit`): 16 MiB, ~750 MB/s per connection at 22 ms RTT,
 * and the same 16 MiB the gateway's HTTP/2 stream window already grants an upstream agent.
 */
export const MAX_RECEIVE_WINDOW_BYTES = 16 * 1024 * 1024;

/**
 * A pause in a connection's data at least this long, right after a burst of about a window, is
 * the sender waiting for credit: on loopback credit comes back in tens of microseconds, over a
 * WAN it takes the round trip. Shorter waits are left alone: event-loop lag looks like them, and
 * below 10 ms the base window already allows 400 MB/s per connection.
 */
export const WINDOW_WAIT_MS = 10;

/** Window-bound bursts seen in a row before the window grows: one alone can be a fluke. */
const GROW_AFTER_WAITS = 2;

/**
 * Where a budget is shared (the server's, per tenant), a connection's window opens above the
 * protocol's initial one only once it has received this much: a connection that carried a credit
 * batch is a transfer, while an idle or interactive one (a watch, an exec session) never needs
 * more than the initial window and so holds only that of its tenant's bytes in flight. The open
 * comes while most of the initial window is still unspent, about a round trip before it would be.
 */
export const OPEN_WINDOW_AFTER_BYTES = CREDIT_BATCH_BYTES;

export interface ReceiveWindowPolicy {
  /** Where the window starts (granted by `openWindow`). */
  initial: number;
  /**
   * Bytes received before `openWindow` raises the window to `initial` (0: at once). Until then
   * the window is the protocol's initial one.
   */
  openAfterBytes: number;
  /** Where growth stops. */
  max: number;
  /** Milliseconds, monotonic. */
  now: () => number;
  /**
   * Where window above the protocol's initial one comes from: the server's tenant budget of
   * bytes in flight (lib/server/policy/tenant-quotas.ts). Absent: no limit but `max`.
   */
  budget?: WindowBudget;
}

/**
 * Bytes of receive window shared by many connections. `take` grants at most what is asked for
 * (less, or 0, when the budget runs low: the window then stays smaller, the connection slower);
 * `give` returns it when the connection ends.
 */
export interface WindowBudget {
  take(bytes: number): number;
  give(bytes: number): void;
}

/** Chooses the mode for a stream from the peer's offer (agent side: the server's answer). */
export function negotiatedFlow(headerValues: readonly unknown[]): FlowMode {
  return headerValues.some(
    (v) =>
      typeof v === "string" &&
      v
        .split(",")
        .map((s) => s.trim())
        .includes(CREDIT_FLOW_V1),
  )
    ? "credit"
    : "upstream";
}

/**
 * Credit state of one connection, both directions. Single producer per direction: at most one
 * waiter for send credit at a time.
 *
 * The receive window tunes itself, as TCP's receive autotuning and Go's HTTP/2 BDP estimator do.
 * A sender held back by the window sends a window's worth, then waits a round trip for credit:
 * the receiver sees bursts of about a window separated by pauses. So when, twice in a row, data
 * resumes after a pause of at least WINDOW_WAIT_MS, the burst before it was about a window (from
 * three quarters of it to one packet past it: a sender whose credit came back in time sends on
 * far past the window, and a hiccup in that is no reason to grow), and our consumer kept up
 * (under a quarter of the window unconsumed), the window doubles, up to `max`. Interactive
 * traffic (small bursts), a sender that is itself the limit (no pauses) and a slow or stalled
 * consumer (its unconsumed bytes are what holds the sender) never grow it. A consumer that
 * stalls after its socket buffers took the first bursts can have grown it before it stalled: what
 * a stalled reader holds is bounded by `max`, and usually by the window it started with.
 */
export class ConnectionCredit {
  private sendCredit = CONNECTION_WINDOW_BYTES;
  private outstanding = 0;
  private toGrant = 0;
  private waiter: (() => void) | undefined;
  /** Sender: parts of a write that did not fit the credit, sent as credit returns. */
  private queued: Uint8Array[] = [];
  private sendPart: ((part: Uint8Array) => boolean) | undefined;
  private readonly policy: ReceiveWindowPolicy;
  /** What we currently let the peer have in flight towards us. */
  private window = CONNECTION_WINDOW_BYTES;
  /** Bytes received since the last pause, and when the last of them came. */
  private burst = 0;
  private lastReceivedAt: number | null = null;
  /** Window-bound bursts in a row. */
  private waits = 0;
  /** Window above the protocol's initial one taken from the budget, given back by `cancel`. */
  private taken = 0;
  /** Bytes still to receive before the window opens (`openWindow`, `openAfterBytes`); -1: no open pending. */
  private untilOpen = -1;

  /** `grant` sends a KGW_CREDIT packet for this connection. */
  constructor(
    private readonly grant: (bytes: number) => void,
    /** The receive window granted at `openWindow`, or a whole policy. */
    receive: number | Partial<ReceiveWindowPolicy> = RECEIVE_WINDOW_BYTES,
  ) {
    const p = typeof receive === "number" ? { initial: receive } : receive;
    const initial = p.initial ?? RECEIVE_WINDOW_BYTES;
    this.policy = {
      initial,
      openAfterBytes: p.openAfterBytes ?? 0,
      max: Math.max(initial, p.max ?? MAX_RECEIVE_WINDOW_BYTES),
      now: p.now ?? (() => performance.now()),
      ...(p.budget ? { budget: p.budget } : {}),
    };
  }

  /** Sender: `n` bytes were sent. False once the peer's window is used up: stop reading. */
  spend(n: number): boolean {
    this.sendCredit -= n;
    return this.sendCredit > 0;
  }

  get canSend(): boolean {
    return this.sendCredit > 0 && this.queued.length === 0;
  }

  /**
   * Sender: sends `data` through `sendPart` in packets of at most MAX_DATA_PACKET_BYTES while
   * credit lasts and keeps the rest (views, not copies) to send as credit returns, so a single
   * large write (a 16 MiB gRPC packet, say) never runs past the peer's window. False when the
   * caller should stop reading: credit is used up, parts are waiting, or `sendPart` said so.
   */
  write(data: Uint8Array, sendPart: (part: Uint8Array) => boolean): boolean {
    this.sendPart = sendPart;
    let writable = true;
    for (const part of dataChunks(data)) {
      if (this.canSend) {
        writable = sendPart(part) && writable;
        this.spend(part.byteLength);
      } else {
        this.queued.push(part);
      }
    }
    return writable && this.canSend;
  }

  /** The receive window now (grows while the window is what limits the connection). */
  get receiveWindow(): number {
    return this.window;
  }

  /** Runs `cb` once there is send credit again and nothing waiting (at once if so). */
  onceCredit(cb: () => void): void {
    if (this.canSend) queueMicrotask(cb);
    else this.waiter = cb;
  }

  /** The peer returned `n` bytes of credit: waiting parts go first, then the reader resumes. */
  replenish(n: number): void {
    this.sendCredit += n;
    while (this.sendCredit > 0 && this.queued.length > 0) {
      const part = this.queued.shift()!;
      this.spend(part.byteLength);
      this.sendPart?.(part);
    }
    if (this.canSend && this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w();
    }
  }

  /**
   * Receiver: raises the peer's window from the protocol's initial one to ours, at once or once
   * `openAfterBytes` have arrived. Call once, after the peer knows the connection (DIAL_RSP sent
   * or received).
   */
  openWindow(): void {
    if (this.policy.openAfterBytes <= 0) this.raiseWindow(this.policy.initial);
    else this.untilOpen = this.policy.openAfterBytes;
  }

  /** Receiver: `n` bytes arrived. False when the peer sent past its window (it broke the rules). */
  received(n: number): boolean {
    if (this.untilOpen >= 0) {
      this.untilOpen -= n;
      if (this.untilOpen <= 0) {
        this.untilOpen = -1;
        this.raiseWindow(this.policy.initial);
      }
    }
    const now = this.policy.now();
    if (this.lastReceivedAt !== null && now - this.lastReceivedAt >= WINDOW_WAIT_MS) {
      const windowSized =
        this.burst >= (this.window * 3) / 4 && this.burst <= this.window + MAX_DATA_PACKET_BYTES;
      if (windowSized && this.outstanding <= this.window / 4) {
        if (++this.waits >= GROW_AFTER_WAITS) {
          this.waits = 0;
          this.raiseWindow(Math.min(this.window * 2, this.policy.max));
        }
      } else {
        this.waits = 0;
      }
      this.burst = 0;
    }
    this.lastReceivedAt = now;
    this.burst += n;
    this.outstanding += n;
    return this.outstanding <= this.window + MAX_DATA_PACKET_BYTES;
  }

  /** Receiver: `n` bytes left our buffers; credit goes back to the sender in batches. */
  released(n: number): void {
    this.outstanding -= n;
    this.toGrant += n;
    if (this.toGrant >= CREDIT_BATCH_BYTES) {
      const bytes = this.toGrant;
      this.toGrant = 0;
      this.grant(bytes);
    }
  }

  /**
   * Drops a parked waiter and waiting parts (the connection is closing), and gives the window it
   * took from the budget back.
   */
  cancel(): void {
    this.waiter = undefined;
    this.queued = [];
    this.sendPart = undefined;
    if (this.taken > 0) {
      this.policy.budget?.give(this.taken);
      this.taken = 0;
    }
  }

  private raiseWindow(to: number): void {
    if (to <= this.window) return;
    let extra = to - this.window;
    if (this.policy.budget) {
      extra = this.policy.budget.take(extra);
      if (extra <= 0) return;
      this.taken += extra;
    }
    this.window += extra;
    this.grant(extra);
  }
}

/** Splits a payload into views of at most MAX_DATA_PACKET_BYTES (no copies). */
export function* dataChunks(data: Uint8Array): Generator<Uint8Array> {
  if (data.byteLength <= MAX_DATA_PACKET_BYTES) {
    yield data;
    return;
  }
  for (let off = 0; off < data.byteLength; off += MAX_DATA_PACKET_BYTES) {
    yield data.subarray(off, Math.min(off + MAX_DATA_PACKET_BYTES, data.byteLength));
  }
}
