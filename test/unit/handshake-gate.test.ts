import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import type { Server as TlsServer } from "node:tls";
import { describe, expect, it, vi } from "vitest";
import { parseOpenFilesLimit } from "../../lib/transport/descriptor-limit.js";
import {
  HandshakeGate,
  type HandshakeLimits,
  type HandshakeRefusal,
  sourceKey,
} from "../../lib/transport/handshake-gate.js";

describe("sourceKey: what a per-source handshake limit counts", () => {
  it("counts IPv4 sources by address, IPv4-mapped IPv6 as the IPv4 address", () => {
    expect(sourceKey("192.0.2.7")).toBe("192.0.2.7");
    expect(sourceKey("::ffff:192.0.2.7")).toBe("192.0.2.7");
  });

  it("counts IPv6 sources by their /64, however the address is written", () => {
    const key = "2001:db8:aa:bb::/64";
    expect(sourceKey("2001:db8:aa:bb::1")).toBe(key);
    expect(sourceKey("2001:0db8:00aa:00bb:ffff:1:2:3")).toBe(key);
    expect(sourceKey("2001:DB8:AA:BB:0:0:0:9")).toBe(key);
    expect(sourceKey("2001:db8:aa:bc::1")).not.toBe(key);
  });

  it("handles compressed forms, zones and embedded IPv4 tails", () => {
    expect(sourceKey("::1")).toBe("0:0:0:0::/64");
    expect(sourceKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(sourceKey("2001:db8::")).toBe("2001:db8:0:0::/64");
    expect(sourceKey("64:ff9b::192.0.2.1")).toBe("64:ff9b:0:0::/64");
    expect(sourceKey("1:2:3:4:5:6:192.0.2.1")).toBe("1:2:3:4::/64");
  });
});

/** A fake raw socket: what the gate reads and calls before TLS. */
function rawSocket(address: string, port: number) {
  const s = new EventEmitter() as EventEmitter & { reset: boolean; destroyed: boolean };
  s.reset = false;
  s.destroyed = false;
  Object.assign(s, {
    remoteAddress: address,
    remotePort: port,
    resetAndDestroy() {
      s.reset = true;
      s.destroyed = true;
      s.emit("close");
    },
  });
  return s;
}

describe("HandshakeGate: connections over a limit wait their turn", () => {
  function gated(limits: HandshakeLimits) {
    const refusals: HandshakeRefusal[] = [];
    const started: string[] = [];
    const server = new EventEmitter();
    // Stands in for the TLS server's own listener: the handshake starts when it is called.
    server.on("connection", (s: Socket) => started.push(`${s.remoteAddress}:${s.remotePort}`));
    const gate = new HandshakeGate(limits, { refused: (r) => refusals.push(r) });
    gate.guard(server as unknown as TlsServer);
    let port = 1;
    const connect = (address: string) => {
      const s = rawSocket(address, port++);
      server.emit("connection", s as unknown as Socket);
      return s;
    };
    return { gate, connect, refusals, started };
  }

  it("starts a source's excess in order as its handshakes end, and resets what has nowhere to wait", () => {
    const g = gated({ maxInProgress: 0, maxPerSource: 2, maxWaiting: 3, waitMs: 60_000 });
    const sockets = Array.from({ length: 6 }, () => g.connect("192.0.2.1"));
    expect(g.started).toEqual(["192.0.2.1:1", "192.0.2.1:2"]);
    expect(g.gate.waiting).toBe(3);
    expect(sockets.map((s) => s.reset)).toEqual([false, false, false, false, false, true]);
    expect(g.refusals).toEqual(["handshakes_per_source"]);
    sockets[0]!.emit("close"); // a handshake ends: the first waiting starts
    expect(g.started).toEqual(["192.0.2.1:1", "192.0.2.1:2", "192.0.2.1:3"]);
    sockets[4]!.emit("close"); // a waiting connection leaves: it is no longer counted
    expect(g.gate.waiting).toBe(1);
    sockets[1]!.emit("close");
    expect(g.started.at(-1)).toBe("192.0.2.1:4");
    expect(g.gate.waiting).toBe(0);
  });

  it("serves waiting sources in turn when the listener's limit frees a slot", () => {
    const g = gated({ maxInProgress: 1, maxPerSource: 0, maxWaiting: 10, waitMs: 60_000 });
    const a = [g.connect("192.0.2.1"), g.connect("192.0.2.1"), g.connect("192.0.2.1")];
    g.connect("192.0.2.2");
    expect(g.started).toEqual(["192.0.2.1:1"]);
    a[0]!.emit("close");
    expect(g.started).toEqual(["192.0.2.1:1", "192.0.2.1:2"]);
    a[1]!.emit("close");
    // 192.0.2.1 has had its turn: 192.0.2.2's comes before 192.0.2.1's third.
    expect(g.started).toEqual(["192.0.2.1:1", "192.0.2.1:2", "192.0.2.2:4"]);
    expect(g.refusals).toEqual([]);
    a[2]!.emit("close"); // leaves the line, and its timer with it
    expect(g.gate.waiting).toBe(0);
  });

  it("starts a connection held by the rate even when the bucket refills between two readings", async () => {
    // Each reading of the clock moves it 30 ms: the bucket (20/s, one token per 50 ms) is short
    // when the gate decides the connection must wait, and full when it asks how long for.
    let t = 0;
    const refusals: HandshakeRefusal[] = [];
    const started: string[] = [];
    const server = new EventEmitter();
    server.on("connection", (s: Socket) => started.push(`${s.remoteAddress}:${s.remotePort}`));
    const gate = new HandshakeGate(
      { maxInProgress: 0, maxPerSource: 0, maxNewPerSecond: 20, burst: 1, maxWaiting: 10, waitMs: 60_000 },
      { refused: (r) => refusals.push(r) },
      () => (t += 30),
    );
    gate.guard(server as unknown as TlsServer);
    server.emit("connection", rawSocket("192.0.2.1", 1) as unknown as Socket);
    const second = rawSocket("192.0.2.1", 2);
    server.emit("connection", second as unknown as Socket);
    // Before the fix the line waited for a release no handshake would send: nothing started it.
    await vi.waitFor(() => expect(started).toEqual(["192.0.2.1:1", "192.0.2.1:2"]), { timeout: 2000 });
    expect(refusals).toEqual([]);
    second.emit("close");
  });

  it("with nowhere to wait (maxWaiting 0) resets at once, as before", () => {
    const g = gated({ maxInProgress: 0, maxPerSource: 1, maxWaiting: 0 });
    g.connect("192.0.2.1");
    expect(g.connect("192.0.2.1").reset).toBe(true);
    expect(g.refusals).toEqual(["handshakes_per_source"]);
  });
});

describe("parseOpenFilesLimit: the descriptors waiting connections are sized against", () => {
  it("reads the soft limit of /proc/self/limits, and null where there is none", () => {
    const text = [
      "Limit                     Soft Limit           Hard Limit           Units     ",
      "Max open files            20000                524288               files     ",
    ].join("\n");
    expect(parseOpenFilesLimit(text)).toBe(20000);
    expect(
      parseOpenFilesLimit("Max open files            unlimited            unlimited            files"),
    ).toBe(null);
    expect(parseOpenFilesLimit("")).toBe(null);
  });
});
