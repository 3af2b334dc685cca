import { describe, expect, it, vi } from "vitest";
import {
  AGENT_RECEIVE_WINDOW_BYTES,
  CONNECTION_WINDOW_BYTES,
  ConnectionCredit,
  CREDIT_BATCH_BYTES,
  dataChunks,
  MAX_DATA_PACKET_BYTES,
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
    expect(c.received(RECEIVE_WINDOW_BYTES + MAX_DATA_PACKET_BYTES)).toBe(true);
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
