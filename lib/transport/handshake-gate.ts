/**
 * Bounds the TLS handshakes a listener has in progress, in total and per source, and how many
 * start each second; connections over a bound wait their turn, accepted but TLS not started, for
 * a bounded time and in a bounded number.
 *
 * A handshake is the costliest thing an unauthenticated client can make us do: a socket, a few
 * tens of KiB of OpenSSL state, and CPU for the key exchange. Without a bound, clients that open
 * TCP and then send nothing (or a byte every few seconds) hold descriptors and memory until the
 * handshake timeout, and a flood of them starves legitimate agents and callers of descriptors.
 * So a listener has at most `maxInProgress` handshakes under way, a source at most
 * `maxPerSource`, and `maxNewPerSecond` start a second (a token bucket holding `burst`).
 *
 * A connection over one of those bounds is not refused: it waits, costing a descriptor and the
 * few hundred bytes of its ClientHello (more than MAX_WAITING_BYTES and it is reset), no TLS
 * state and no CPU, until its handshake may start,
 * at most `waitMs`; sources take turns (waiting-line.ts). A large cluster behind one NAT address
 * reconnecting at once looks, before TLS, exactly like a flood from one address: waiting serves
 * it at the speed the bounds allow, where resetting the excess made most of it retry seconds
 * later (issue 26). A flood that never finishes its handshakes holds its source's
 * `maxPerSource` slots for the handshake timeout, and what it queues behind them leaves after
 * `waitMs`: it stays bounded by those numbers and by `maxWaiting`, the most connections a
 * listener keeps waiting, past which new ones are reset at once, before TLS, as before.
 * Each listener has its own gate, so a flood on the agent port cannot starve the frontend and the
 * reverse.
 *
 * Sources are counted by address, IPv6 by its /64: one host is given a whole /64 and could
 * otherwise pick a new address per connection. Behind a load balancer the source is the client's
 * only when the balancer preserves client addresses (docs/CONFIGURATION.md).
 */
import { isIPv6, type Socket } from "node:net";
import type { TLSSocket, Server as TlsServer } from "node:tls";
import { takeTlsStart } from "./node-internals.js";
import { TokenBucket } from "./token-bucket.js";
import { WaitingLine } from "./waiting-line.js";

export interface HandshakeLimits {
  /** Handshakes in progress on the listener; 0 means no limit. */
  maxInProgress: number;
  /** Handshakes in progress from one source address (IPv6: one /64); 0 means no limit. */
  maxPerSource: number;
  /**
   * New handshakes started per second on the listener (a token bucket); 0 or absent means no
   * limit. Bounds the CPU a reconnect storm takes (token-bucket.ts).
   */
  maxNewPerSecond?: number;
  /** The bucket's size: handshakes that may start at once after a quiet spell (0 or absent: a second's worth). */
  burst?: number;
  /** Connections that may wait for their handshake to start; 0 or absent: none wait, all are reset. */
  maxWaiting?: number;
  /** How long a connection may wait for its handshake to start (required with maxWaiting). */
  waitMs?: number;
}

export type HandshakeRefusal =
  | "handshakes_in_progress"
  | "handshakes_per_source"
  | "source_throttled"
  | "handshake_rate"
  | "handshake_wait";

/** The key a source is counted under: the IPv4 address, or the first 64 bits of an IPv6 one. */
export function sourceKey(address: string): string {
  if (address.startsWith("::ffff:") && address.includes(".")) return address.slice("::ffff:".length);
  if (!isIPv6(address)) return address;
  return `${ipv6Groups(address).slice(0, 4).join(":")}::/64`;
}

/** The eight 16-bit groups of an IPv6 address, as lower-case hex without leading zeros. */
function ipv6Groups(address: string): string[] {
  const split = (part: string): string[] =>
    part === ""
      ? []
      : part.split(":").flatMap((g) => {
          if (!g.includes(".")) return [g];
          // An embedded IPv4 tail (64:ff9b::192.0.2.1) is the last two groups.
          const [a = 0, b = 0, c = 0, d = 0] = g.split(".").map(Number);
          return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
        });
  const bare = address.split("%")[0]!;
  const gap = bare.indexOf("::");
  const left = split(gap === -1 ? bare : bare.slice(0, gap));
  const right = gap === -1 ? [] : split(bare.slice(gap + 2));
  const zeros = gap === -1 ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...zeros, ...right].map((g) => Number.parseInt(g, 16).toString(16));
}

/** A connection waiting for its handshake to start. */
interface Waiting {
  readonly raw: Socket;
  readonly source: string;
  /** The bound it waits for: its refusal if it cannot wait after all. */
  readonly reason: HandshakeRefusal;
  timer: ReturnType<typeof setTimeout> | null;
  leave: () => void;
}

const ignoreError = () => {};

/**
 * What a waiting connection may have sent before its handshake starts. A ClientHello takes 0.5-2
 * KiB (with post-quantum key shares and a resumption ticket, under 4 KiB); more is not a client
 * waiting for TLS, and would be memory the gate holds for it: Node keeps reading an accepted
 * socket into its buffer (up to 64 KiB and a read's worth). Over this the connection is reset:
 * 2,048 waiting then hold about 30 MB at most, sent bytes and sockets together (measured).
 */
const MAX_WAITING_BYTES = 8 * 1024;

export class HandshakeGate {
  private total = 0;
  private readonly bySource = new Map<string, number>();
  /** "address:port" of each counted connection → its release; a TCP peer is unique per listener. */
  private readonly open = new Map<string, () => void>();
  /** New handshakes per second (limits.maxNewPerSecond); null without a limit. */
  private readonly rate: TokenBucket | null;
  private readonly line = new WaitingLine<Waiting>();
  /** Set while waiting connections wait for the bucket only. */
  private rateTimer: ReturnType<typeof setTimeout> | null = null;
  /** Runs the TLS server's own connection handling: the handshake starts (set by guard). */
  private startTls: (raw: Socket) => void = () => {};

  constructor(
    private readonly limits: HandshakeLimits,
    private readonly hooks: {
      refused(reason: HandshakeRefusal): void;
      /**
       * Whether `source` (a sourceKey) may start a handshake now, beyond the counts above: a
       * source that keeps being refused is throttled (refusal-throttle.ts).
       */
      admitSource?(source: string): boolean;
      /** The number of handshakes in progress changed (for a gauge). */
      changed?(inProgress: number): void;
      /** The number of connections waiting changed (for a gauge). */
      waiting?(waiting: number): void;
    },
    now?: () => number,
  ) {
    const perSecond = limits.maxNewPerSecond ?? 0;
    this.rate =
      perSecond > 0
        ? new TokenBucket({
            ratePerSecond: perSecond,
            burst: Math.max(1, limits.burst || perSecond),
            ...(now ? { now } : {}),
          })
        : null;
  }

  /** Handshakes under way right now. */
  get inProgress(): number {
    return this.total;
  }

  /** Connections waiting for their handshake to start. */
  get waiting(): number {
    return this.line.size;
  }

  /**
   * Gates `server`'s connections; call before it listens, and before any other `connection`
   * listener is added (those run at accept, as before; only TLS waits).
   */
  guard(server: TlsServer): void {
    this.startTls = takeTlsStart(server);
    server.on("connection", (raw: Socket) => this.admit(raw));
    server.on("secureConnection", (socket: TLSSocket) => this.open.get(peerOf(socket))?.());
  }

  private admit(raw: Socket): void {
    if (raw.remoteAddress === undefined) {
      raw.destroy(); // the peer left before we looked: nothing to count
      return;
    }
    const source = sourceKey(raw.remoteAddress);
    if (this.hooks.admitSource && !this.hooks.admitSource(source)) {
      this.refuse(raw, "source_throttled");
      return;
    }
    // Behind others of its source: first come, first served.
    const bound = this.line.has(source) ? this.line.first(source)!.reason : this.bound(source);
    if (bound === null) this.begin(raw, source);
    else this.wait(raw, source, bound);
  }

  /** What keeps `source` from starting a handshake now, or null. */
  private bound(source: string): HandshakeRefusal | null {
    const { maxInProgress, maxPerSource } = this.limits;
    if (maxInProgress > 0 && this.total >= maxInProgress) return "handshakes_in_progress";
    if (maxPerSource > 0 && (this.bySource.get(source) ?? 0) >= maxPerSource) return "handshakes_per_source";
    if (this.rate && this.rate.available < 1) return "handshake_rate";
    return null;
  }

  private refuse(raw: Socket, reason: HandshakeRefusal): void {
    this.hooks.refused(reason);
    // Nothing to say to a client before TLS. Node's TLS server never had this connection, so it
    // is counted once, here, under the gate's reason (not again as a failed handshake).
    raw.resetAndDestroy();
  }

  private wait(raw: Socket, source: string, reason: HandshakeRefusal): void {
    const max = this.limits.maxWaiting ?? 0;
    if (this.line.size >= max) {
      this.refuse(raw, reason);
      return;
    }
    // Until TLS has it, an error (the client's reset) is ours to absorb; its close follows.
    raw.on("error", ignoreError);
    const entry: Waiting = { raw, source, reason, timer: null, leave: () => {} };
    const gone = () => {
      if (this.leave(entry)) this.pump();
    };
    // Paused mode: what it sends stays in its buffer for TLS to read when its turn comes.
    const sent = () => {
      if (raw.readableLength <= MAX_WAITING_BYTES || !this.leave(entry)) return;
      this.refuse(raw, "handshake_wait");
      this.pump();
    };
    entry.leave = () => {
      raw.off("close", gone);
      raw.off("readable", sent);
    };
    raw.once("close", gone);
    raw.on("readable", sent);
    entry.timer = setTimeout(() => {
      entry.timer = null;
      if (!this.leave(entry)) return;
      this.refuse(raw, "handshake_wait");
      this.pump();
    }, this.limits.waitMs ?? 0);
    this.line.add(entry);
    this.hooks.waiting?.(this.line.size);
    this.schedule(reason === "handshake_rate");
  }

  /** Takes `entry` out of the line (false if it was not in it), with its timer and listeners. */
  private leave(entry: Waiting): boolean {
    if (!this.line.remove(entry)) return false;
    this.forget(entry);
    return true;
  }

  private forget(entry: Waiting): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = null;
    entry.leave();
    entry.raw.off("error", ignoreError);
    this.hooks.waiting?.(this.line.size);
    if (this.line.size === 0 && this.rateTimer) {
      clearTimeout(this.rateTimer);
      this.rateTimer = null;
    }
  }

  /**
   * Starts the handshakes of waiting connections while the bounds allow, sources taking turns.
   * A source held back by its own limit passes its turn; once every source has passed in a row,
   * or the listener's limit or the rate holds, it stops. Each start costs O(1), each pass too,
   * and at most maxInProgress / maxPerSource sources can be held back by their own limit.
   */
  private pump(): void {
    let passed = 0;
    while (passed < this.line.sourceCount) {
      const source = this.line.next()!;
      const bound = this.bound(source);
      if (bound === "handshakes_per_source") {
        this.line.pass(source);
        passed++;
        continue;
      }
      if (bound !== null) {
        this.schedule(bound === "handshake_rate");
        return;
      }
      const entry = this.line.take(source)!;
      this.forget(entry);
      this.begin(entry.raw, source);
      passed = 0;
    }
  }

  /**
   * While connections wait for the bucket, wakes up when its next token is there. `heldByRate`:
   * the caller found the bucket empty. The bucket refills between that reading and this one, so
   * it may hold a token by now: a pump must still come (1 ms on), or the line would wait for a
   * release that no handshake in progress will ever send. Held by a slot instead, a release pumps.
   */
  private schedule(heldByRate: boolean): void {
    if (this.rateTimer || !this.rate || this.line.size === 0) return;
    const ms = this.rate.msUntilToken();
    if (ms === 0 && !heldByRate) return;
    this.rateTimer = setTimeout(
      () => {
        this.rateTimer = null;
        this.pump();
      },
      Math.max(1, Math.ceil(ms)),
    );
  }

  private begin(raw: Socket, source: string): void {
    if (raw.destroyed) return;
    this.rate?.take();
    this.total++;
    this.bySource.set(source, (this.bySource.get(source) ?? 0) + 1);
    this.hooks.changed?.(this.total);
    const peer = peerOf(raw);
    let counted = true;
    const release = () => {
      if (!counted) return;
      counted = false;
      this.open.delete(peer);
      this.total--;
      const left = (this.bySource.get(source) ?? 1) - 1;
      if (left === 0) this.bySource.delete(source);
      else this.bySource.set(source, left);
      this.hooks.changed?.(this.total);
      this.pump();
    };
    this.open.set(peer, release);
    raw.once("close", release);
    this.startTls(raw);
  }
}

function peerOf(socket: Socket): string {
  return `${socket.remoteAddress}:${socket.remotePort}`;
}
