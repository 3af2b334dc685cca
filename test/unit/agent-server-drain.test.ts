/**
 * The agent's client set when a server sends DRAIN (drain advice, lib/tunnel/drain-advice.ts):
 * the draining server stops counting, a replacement is dialed at once, and the draining
 * connection stays until the tunnels on it are done (make-before-break).
 */
import { EventEmitter } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClientSet, type ServerLink } from "../../lib/agent/client-set.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";
import { DRAIN_V1, negotiatedDrain } from "../../lib/tunnel/drain-advice.js";

class FakeLink
  extends EventEmitter<{ closed: [reason: string]; load: [load: number]; serverDraining: [] }>
  implements ServerLink
{
  load = 0;
  drained = false;
  closedWith: string | null = null;
  /** How it went: cut at once, ended in order, or ended in order as a drained server's. */
  how: "cut" | "ended" | "ended drained" | null = null;

  constructor(
    readonly serverId: string,
    readonly serverCount: number,
  ) {
    super();
  }

  drain(): void {
    this.drained = true;
  }

  close(reason: string, how: NonNullable<FakeLink["how"]> = "cut"): void {
    if (this.closedWith !== null) return;
    this.closedWith = reason;
    this.how = how;
    this.emit("closed", reason);
  }

  end(reason: string, opts?: { drained?: boolean }): Promise<void> {
    this.close(reason, opts?.drained ? "ended drained" : "ended");
    return Promise.resolve();
  }

  setLoad(load: number): void {
    this.load = load;
    this.emit("load", load);
  }

  serverDrains(): void {
    this.emit("serverDraining");
  }
}

const SYNC = 1_000;

function clientSet(outcomes: (FakeLink | Error)[]) {
  const calls: number[] = [];
  const connect = vi.fn(async (): Promise<ServerLink> => {
    calls.push(Date.now());
    const next = outcomes.shift() ?? new Error("no more servers");
    if (next instanceof Error) throw next;
    return next;
  });
  const set = new ClientSet({
    connect,
    syncIntervalMs: SYNC,
    syncIntervalCapMs: 8_000,
    random: () => 0.5,
    log: silentLogger(),
    metrics: new AgentMetrics(),
  });
  return { set, calls };
}

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("drain advice negotiation", () => {
  it("recognizes v1, also when HTTP/2 joined the values", () => {
    expect(negotiatedDrain([DRAIN_V1])).toBe(true);
    expect(negotiatedDrain(["v0, v1"])).toBe(true);
    expect(negotiatedDrain([])).toBe(false);
    expect(negotiatedDrain(["v2", Buffer.from("v1")])).toBe(false);
  });
});

describe("ClientSet, when a server drains", () => {
  it("dials a replacement at once and keeps the draining connection until its tunnels end", async () => {
    const a = new FakeLink("A", 1);
    const b = new FakeLink("B", 1);
    const { set, calls } = clientSet([a, b]);
    set.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(set.state().connectedServers).toEqual(["A"]);
    a.setLoad(2);

    await vi.advanceTimersByTimeAsync(5_000);
    a.serverDrains();
    expect(set.state()).toMatchObject({ connectedServers: [], drainingServers: ["A"], load: 2 });
    expect(set.ready).toBe(true); // still connected, still carrying tunnels
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toEqual([0, 5_000]); // no backoff: the server asked us to move
    expect(set.state()).toMatchObject({ connectedServers: ["B"], drainingServers: ["A"] });
    expect(a.closedWith).toBeNull(); // made before broken

    a.setLoad(1);
    expect(a.closedWith).toBeNull();
    a.setLoad(0);
    expect(a.closedWith).toBe("server drained");
    // In order: what is queued on it (the last tunnel's final DATA and CLOSE_RSP) still arrives.
    expect(a.how).toBe("ended drained");
    expect(set.state()).toMatchObject({ connectedServers: ["B"], drainingServers: [], load: 0 });
    // B is all that is wanted: nothing more is dialed.
    await vi.advanceTimersByTimeAsync(30_000);
    expect(calls).toHaveLength(2);
    await set.stop();
  });

  it("ends an idle draining connection at once, and backs off when no other server answers", async () => {
    const a = new FakeLink("A", 1);
    const { set, calls } = clientSet([a, new Error("refused"), new Error("refused")]);
    set.start();
    await vi.advanceTimersByTimeAsync(0);
    a.serverDrains();
    expect(a.closedWith).toBe("server drained");
    expect(a.how).toBe("ended drained");
    expect(set.ready).toBe(false);
    await vi.advanceTimersByTimeAsync(2_000);
    // Right away, then the usual backoff: 0.5 × 1 s, then 0.5 × 2 s.
    expect(calls).toEqual([0, 0, 500, 1_500]);
    await set.stop();
  });

  it("closes a new connection that lands on the draining server, and tries again", async () => {
    const a = new FakeLink("A", 1);
    const again = new FakeLink("A", 1);
    const b = new FakeLink("B", 1);
    const { set } = clientSet([a, again, b]);
    set.start();
    await vi.advanceTimersByTimeAsync(0);
    a.setLoad(1);
    a.serverDrains();
    await vi.advanceTimersByTimeAsync(0);
    expect(again.closedWith).toBe("server draining");
    await vi.advanceTimersByTimeAsync(500);
    expect(set.state()).toMatchObject({ connectedServers: ["B"], drainingServers: ["A"] });
    await set.stop();
    expect(a.closedWith).toBe("agent stopping"); // stop ends draining connections too
  });

  it("keeps the rest of the set: only the draining server is replaced", async () => {
    const a = new FakeLink("A", 2);
    const b = new FakeLink("B", 2);
    const c = new FakeLink("C", 2);
    const { set } = clientSet([a, b, c]);
    set.start();
    await vi.advanceTimersByTimeAsync(SYNC);
    expect(set.state().connectedServers).toEqual(["A", "B"]);
    b.setLoad(1);
    b.serverDrains();
    await vi.advanceTimersByTimeAsync(0);
    expect(set.state()).toMatchObject({ connectedServers: ["A", "C"], drainingServers: ["B"] });
    // The agent's own drain reaches the draining server too.
    set.drain();
    expect([a.drained, b.drained, c.drained]).toEqual([true, true, true]);
    await set.stop();
  });
});
