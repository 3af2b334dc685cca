import { describe, expect, it, vi } from "vitest";
import {
  AGENT_RECEIVE_WINDOW_BYTES,
  CONNECTION_WINDOW_BYTES,
  ConnectionCredit,
  CREDIT_BATCH_BYTES,
  dataChunks,
  MAX_DATA_PACKET_BYTES,
  MAX_RECEIVE_WINDOW_BYTES,
  negotiatedFlow,
  RECEIVE_WINDOW_BYTES,
} from "../../lib/tunnel/flow-control.js";

describe("per-connection credit", () => {
  it("lets a sender use exactly one window, then waits for credit", async () => {
    const c = new ConnectionCredit(() => {});
    expect(c.spend(CONNECTION_WINDOW_BYTES - 1)).toBe(true);
    expect(c.spend(1)).toBe(false);
    const resumed = vi.fn();
    c.onceCredit(resumed);
    c.replenish(100);
    expect(resumed).toHaveBeenCalledTimes(1);
    expect(c.canSend).toBe(true);
  });

  it("returns credit in batches as the receiver releases bytes", () => {
    const grants: number[] = [];
    const c = new ConnectionCredit((n) => grants.push(n));
    const chunk = 64 * 1024;
    for (let i = 0; i < 32; i++) {
      expect(c.received(chunk)).toBe(true);
      c.released(chunk);
    }
    expect(grants.every((g) => g >= CREDIT_BATCH_BYTES)).toBe(true);
    expect(grants.reduce((a, b) => a + b, 0)).toBe(32 * chunk);
  });

  it("never deadlocks: a blocked sender always gets credit once the receiver drains", () => {
    let grantedToSender = 0;
    const receiver = new ConnectionCredit((n) => {
      grantedToSender += n;
    });
    const sender = new ConnectionCredit(() => {});
    let inFlight = 0;
    // Send odd-sized chunks until blocked, deliver and release all of them, repeat.
    for (let round = 0; round < 50; round++) {
      while (sender.canSend) {
        const n = 1000 + ((round * 7919) % 60_000);
        sender.spend(n);
        expect(receiver.received(n)).toBe(true);
        inFlight += n;
      }
      receiver.released(inFlight);
      inFlight = 0;
      sender.replenish(grantedToSender);
      grantedToSender = 0;
      expect(sender.canSend).toBe(true);
    }
  });

  it("flags a peer that sends past the window we granted", () => {
    const c = new ConnectionCredit(() => {});
    c.openWindow();
    expect(c.received(RECEIVE_WINDOW_BYTES + MAX_DATA_PACKET_BYTES)).toBe(true);
    expect(c.received(1)).toBe(false);
  });

  it("holds a peer to the protocol's initial window until ours is opened", () => {
    const c = new ConnectionCredit(() => {});
    expect(c.received(CONNECTION_WINDOW_BYTES + MAX_DATA_PACKET_BYTES)).toBe(true);
    expect(c.received(1)).toBe(false);
  });

  it("grants the window its owner chose", () => {
    const grants: number[] = [];
    const c = new ConnectionCredit((n) => grants.push(n), AGENT_RECEIVE_WINDOW_BYTES);
    c.openWindow();
    expect(grants).toEqual([AGENT_RECEIVE_WINDOW_BYTES - CONNECTION_WINDOW_BYTES]);
    expect(c.received(AGENT_RECEIVE_WINDOW_BYTES + MAX_DATA_PACKET_BYTES)).toBe(true);
    expect(c.received(1)).toBe(false);
  });

  it("raises the peer's initial window to ours with one grant, which the sender can use", () => {
    const grants: number[] = [];
    const receiver = new ConnectionCredit((n) => grants.push(n));
    const sender = new ConnectionCredit(() => {});
    receiver.openWindow();
    expect(grants).toEqual([RECEIVE_WINDOW_BYTES - CONNECTION_WINDOW_BYTES]);
    sender.replenish(grants[0]!);
    expect(sender.spend(RECEIVE_WINDOW_BYTES - 1)).toBe(true);
    expect(sender.spend(1)).toBe(false);
  });

  describe("write", () => {
    it("sends a write larger than the credit only as far as the credit goes, the rest as it returns", () => {
      const sent: number[] = [];
      const c = new ConnectionCredit(() => {});
      const big = new Uint8Array(3 * CONNECTION_WINDOW_BYTES);
      expect(c.write(big, (part) => sent.push(part.byteLength) > 0)).toBe(false);
      const total = () => sent.reduce((a, b) => a + b, 0);
      expect(total()).toBe(CONNECTION_WINDOW_BYTES);
      expect(Math.max(...sent)).toBeLessThanOrEqual(MAX_DATA_PACKET_BYTES);

      const resumed = vi.fn();
      c.onceCredit(resumed);
      c.replenish(CONNECTION_WINDOW_BYTES);
      expect(total()).toBe(2 * CONNECTION_WINDOW_BYTES);
      expect(resumed).not.toHaveBeenCalled(); // parts still waiting: the reader stays paused
      c.replenish(CONNECTION_WINDOW_BYTES);
      expect(total()).toBe(3 * CONNECTION_WINDOW_BYTES);
      expect(resumed).not.toHaveBeenCalled(); // all sent, but no credit left
      c.replenish(1);
      expect(resumed).toHaveBeenCalledOnce();
    });

    it("drops waiting parts when the connection closes", () => {
      const sent: number[] = [];
      const c = new ConnectionCredit(() => {});
      c.write(new Uint8Array(2 * CONNECTION_WINDOW_BYTES), (part) => sent.push(part.byteLength) > 0);
      const before = sent.length;
      c.cancel();
      c.replenish(CONNECTION_WINDOW_BYTES);
      expect(sent.length).toBe(before);
    });
  });

  describe("receive window autotuning", () => {
    const MiB = 1024 * 1024;
    /** A receiver on a fake clock, and a sender wired to it through a delay of `rttMs`. */
    function link(rttMs: number, consumer: "fast" | "stalled", max = MAX_RECEIVE_WINDOW_BYTES) {
      let now = 0;
      const inFlight: number[] = [];
      const receiver = new ConnectionCredit((n) => inFlight.push(n), {
        initial: RECEIVE_WINDOW_BYTES,
        max,
        now: () => now,
      });
      const sender = new ConnectionCredit(() => {});
      receiver.openWindow();
      /** One round: the sender sends all its credit; the receiver takes it in after rtt/2. */
      const round = () => {
        now += rttMs / 2;
        for (const g of inFlight.splice(0)) sender.replenish(g);
        let sent = 0;
        while (sender.canSend) {
          sender.spend(256 * 1024);
          sent += 256 * 1024;
        }
        now += rttMs / 2;
        for (let off = 0; off < sent; off += 256 * 1024) {
          expect(receiver.received(256 * 1024)).toBe(true);
          if (consumer === "fast") receiver.released(256 * 1024);
        }
        return sent;
      };
      return { receiver, round };
    }

    it("doubles a WAN connection's window, round by round, up to the cap", () => {
      const { receiver, round } = link(20, "fast");
      const windows: number[] = [];
      for (let i = 0; i < 6; i++) {
        round();
        windows.push(receiver.receiveWindow / MiB);
      }
      expect(windows[0]).toBe(4);
      expect(windows.at(-1)).toBe(16);
      expect(windows).toEqual([...windows].sort((a, b) => a - b));
    });

    it("leaves a loopback connection's window alone: the credit's round trip costs nothing", () => {
      const { receiver, round } = link(0.1, "fast");
      for (let i = 0; i < 10; i++) round();
      expect(receiver.receiveWindow).toBe(RECEIVE_WINDOW_BYTES);
    });

    /** A receiver on a fake clock, fed `times` chunks of `bytes` `gapMs` apart, each consumed at once. */
    function fed(times: number, gapMs: number, bytes: number) {
      let now = 0;
      const c = new ConnectionCredit(() => {}, { now: () => now });
      c.openWindow();
      const feed = () => {
        c.received(bytes);
        c.released(bytes);
      };
      for (let i = 0; i < times; i++) {
        now += gapMs;
        feed();
      }
      return { c, feed, pause: (ms: number) => (now += ms) };
    }

    it("ignores a hiccup in a stream that was flowing freely for far more than a window", () => {
      const { c, feed, pause } = fed(64, 0.05, 256 * 1024);
      pause(10); // a GC pause, say
      feed();
      expect(c.receiveWindow).toBe(RECEIVE_WINDOW_BYTES);
    });

    it("leaves interactive traffic's window alone, however long its pauses", () => {
      const { c } = fed(20, 500, 4096);
      expect(c.receiveWindow).toBe(RECEIVE_WINDOW_BYTES);
    });

    it("never grows the window of a consumer that does not keep up", () => {
      const { receiver, round } = link(20, "stalled");
      round();
      round();
      expect(receiver.receiveWindow).toBe(RECEIVE_WINDOW_BYTES);
    });

    it("stops at its cap", () => {
      const { receiver, round } = link(20, "fast", 8 * MiB);
      for (let i = 0; i < 6; i++) round();
      expect(receiver.receiveWindow).toBe(8 * MiB);
    });
  });

  it("splits large payloads into views without copying", () => {
    const data = Buffer.alloc(MAX_DATA_PACKET_BYTES * 2 + 5);
    const parts = [...dataChunks(data)];
    expect(parts.map((p) => p.byteLength)).toEqual([MAX_DATA_PACKET_BYTES, MAX_DATA_PACKET_BYTES, 5]);
    expect(parts.every((p) => p.buffer === data.buffer)).toBe(true);
  });

  it("is only used when the peer offered it", () => {
    expect(negotiatedFlow([])).toBe("upstream");
    expect(negotiatedFlow(["something-else"])).toBe("upstream");
    expect(negotiatedFlow(["credit-v1"])).toBe("credit");
    expect(negotiatedFlow(["credit-v2, credit-v1"])).toBe("credit");
  });
});
