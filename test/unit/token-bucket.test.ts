import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import type { Server as TlsServer } from "node:tls";
import { describe, expect, it } from "vitest";
import { HandshakeGate, type HandshakeRefusal } from "../../lib/transport/handshake-gate.js";
import { TokenBucket } from "../../lib/transport/token-bucket.js";

describe("TokenBucket", () => {
  it("allows a burst, then the rate, and saves up no more than the burst", () => {
    let now = 0;
    const bucket = new TokenBucket({ ratePerSecond: 10, burst: 5, now: () => now });
    const takes = (n: number) => Array.from({ length: n }, () => bucket.take()).filter(Boolean).length;
    expect(takes(8)).toBe(5);
    now += 100; // one token's worth
    expect(takes(3)).toBe(1);
    now += 250; // two and a half
    expect(takes(3)).toBe(2);
    now += 60_000; // a quiet minute: still only the burst
    expect(bucket.available).toBe(5);
    expect(takes(10)).toBe(5);
  });

  it("says how long until its next token", () => {
    let now = 0;
    const bucket = new TokenBucket({ ratePerSecond: 10, burst: 1, now: () => now });
    expect(bucket.msUntilToken()).toBe(0);
    bucket.take();
    expect(bucket.msUntilToken()).toBeCloseTo(100);
    now += 40;
    expect(bucket.msUntilToken()).toBeCloseTo(60);
  });

  it("ignores a clock that goes backwards, and refuses nonsense", () => {
    let now = 1_000;
    const bucket = new TokenBucket({ ratePerSecond: 1, burst: 1, now: () => now });
    expect(bucket.take()).toBe(true);
    now = 0;
    expect(bucket.take()).toBe(false);
    now = 1_000;
    expect(bucket.take()).toBe(true);
    expect(() => new TokenBucket({ ratePerSecond: 0, burst: 1 })).toThrow(RangeError);
    expect(() => new TokenBucket({ ratePerSecond: 1, burst: 0 })).toThrow(RangeError);
  });
});

/** A fake raw socket: what the gate reads and calls before TLS. */
function rawSocket(address: string, port: number) {
  const s = new EventEmitter() as EventEmitter & { reset: boolean };
  s.reset = false;
  Object.assign(s, {
    remoteAddress: address,
    remotePort: port,
    resetAndDestroy() {
      s.reset = true;
      s.emit("close");
    },
  });
  return s;
}

describe("HandshakeGate with --max-tls-handshake-rate", () => {
  function gated(maxNewPerSecond: number) {
    let now = 0;
    const refusals: HandshakeRefusal[] = [];
    const server = new EventEmitter();
    new HandshakeGate(
      { maxInProgress: 0, maxPerSource: 0, maxNewPerSecond },
      { refused: (r) => refusals.push(r) },
      () => now,
    ).guard(server as unknown as TlsServer);
    let port = 1;
    const connect = (n: number) =>
      Array.from({ length: n }, () => {
        const s = rawSocket("192.0.2.1", port++);
        server.emit("connection", s as unknown as Socket);
        return s;
      });
    return { connect, refusals, tick: (ms: number) => (now += ms) };
  }

  it("resets connections over the rate at accept, and admits again as the bucket refills", () => {
    const g = gated(4);
    const first = g.connect(10);
    expect(first.filter((s) => s.reset)).toHaveLength(6);
    expect(g.refusals).toEqual(Array(6).fill("handshake_rate"));
    g.tick(500); // two tokens
    expect(g.connect(3).filter((s) => !s.reset)).toHaveLength(2);
  });

  it("is off at 0", () => {
    const g = gated(0);
    expect(g.connect(1000).some((s) => s.reset)).toBe(false);
  });
});
