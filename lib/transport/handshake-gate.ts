/**
 * Bounds the TLS handshakes a listener has in progress, in total and per source.
 *
 * A handshake is the costliest thing an unauthenticated client can make us do: a socket, a few
 * tens of KiB of OpenSSL state, and CPU for the key exchange. Without a bound, clients that open
 * TCP and then send nothing (or a byte every few seconds) hold descriptors and memory until the
 * handshake timeout, and a flood of them starves legitimate agents and callers of descriptors.
 * The gate closes a new connection at once when its listener already has `maxInProgress`
 * handshakes under way, or its source already has `maxPerSource`; each listener has its own gate,
 * so a flood on the agent port cannot starve the frontend and the reverse.
 *
 * Sources are counted by address, IPv6 by its /64: one host is given a whole /64 and could
 * otherwise pick a new address per connection. Behind a load balancer the source is the client's
 * only when the balancer preserves client addresses (docs/CONFIGURATION.md).
 */
import { isIPv6, type Socket } from "node:net";
import type { TLSSocket, Server as TlsServer } from "node:tls";
import { TokenBucket } from "./token-bucket.js";

export interface HandshakeLimits {
  /** Handshakes in progress on the listener; 0 means no limit. */
  maxInProgress: number;
  /** Handshakes in progress from one source address (IPv6: one /64); 0 means no limit. */
  maxPerSource: number;
  /**
   * New handshakes started per second on the listener (a token bucket holding one second's
   * worth); 0 or absent means no limit. Bounds the CPU a reconnect storm takes (token-bucket.ts).
   */
  maxNewPerSecond?: number;
}

export type HandshakeRefusal =
  | "handshakes_in_progress"
  | "handshakes_per_source"
  | "source_throttled"
  | "handshake_rate";

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

export class HandshakeGate {
  private total = 0;
  private readonly bySource = new Map<string, number>();
  /** "address:port" of each counted connection → its release; a TCP peer is unique per listener. */
  private readonly open = new Map<string, () => void>();
  /** New handshakes per second (limits.maxNewPerSecond); null without a limit. */
  private readonly rate: TokenBucket | null;

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
    },
    now?: () => number,
  ) {
    const perSecond = limits.maxNewPerSecond ?? 0;
    this.rate =
      perSecond > 0
        ? new TokenBucket({
            ratePerSecond: perSecond,
            burst: Math.max(1, perSecond),
            ...(now ? { now } : {}),
          })
        : null;
  }

  /**
   * Connections this gate refused (reset before TLS). Node's TLS server then reports each as a
   * failed handshake too: `refusedHere` lets that report be told apart, so that one connection is
   * counted (and throttled) once, under the gate's reason. Weak: a refused socket is forgotten
   * with it.
   */
  private readonly refused = new WeakSet<Socket>();

  /** Whether `raw` (the TCP socket under a TLS socket) is one this gate refused. */
  refusedHere(raw: Socket | null): boolean {
    return raw !== null && this.refused.has(raw);
  }

  /** Handshakes under way right now. */
  get inProgress(): number {
    return this.total;
  }

  /** Gates `server`'s connections; call before it listens. */
  guard(server: TlsServer): void {
    server.on("connection", (raw: Socket) => this.admit(raw));
    server.on("secureConnection", (socket: TLSSocket) => this.open.get(peerOf(socket))?.());
  }

  private admit(raw: Socket): void {
    if (raw.remoteAddress === undefined) {
      raw.destroy(); // the peer left before we looked: nothing to count
      return;
    }
    const source = sourceKey(raw.remoteAddress);
    const { maxInProgress, maxPerSource } = this.limits;
    const fromSource = this.bySource.get(source) ?? 0;
    let refusal: HandshakeRefusal | null = null;
    if (maxInProgress > 0 && this.total >= maxInProgress) refusal = "handshakes_in_progress";
    else if (maxPerSource > 0 && fromSource >= maxPerSource) refusal = "handshakes_per_source";
    else if (this.hooks.admitSource && !this.hooks.admitSource(source)) refusal = "source_throttled";
    // Last, so that only a connection that is otherwise admitted takes a token.
    else if (this.rate && !this.rate.take()) refusal = "handshake_rate";
    if (refusal) {
      this.hooks.refused(refusal);
      this.refused.add(raw);
      // Nothing to say to a client before TLS; the TLS layer above sees the reset and lets go.
      raw.resetAndDestroy();
      return;
    }
    this.total++;
    this.bySource.set(source, fromSource + 1);
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
    };
    this.open.set(peer, release);
    raw.once("close", release);
  }
}

function peerOf(socket: Socket): string {
  return `${socket.remoteAddress}:${socket.remotePort}`;
}
