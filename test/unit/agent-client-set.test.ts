import { EventEmitter } from "node:events";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClientSet, type ServerLink } from "../../lib/agent/client-set.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";

class FakeLink
  extends EventEmitter<{ closed: [reason: string]; load: [load: number]; serverCount: [count: number] }>
  implements ServerLink
{
  load = 0;
  drained = false;
  closedWith: string | null = null;

  constructor(
    readonly serverId: string,
    public serverCount: number,
  ) {
    super();
  }

  /** The server announces a new serverCount (KGW_SERVER_COUNT). */
  announce(count: number): void {
    this.serverCount = count;
    this.emit("serverCount", count);
  }

  drain(): void {
    this.drained = true;
  }

  close(reason: string): void {
    if (this.closedWith !== null) return;
    this.closedWith = reason;
    this.emit("closed", reason);
  }

  end(reason: string): Promise<void> {
    this.close(reason);
    return Promise.resolve();
  }

  setLoad(load: number): void {
    this.load = load;
    this.emit("load", load);
  }
}

type Outcome = FakeLink | Error | Promise<FakeLink>;

/** A connect function that plays `outcomes` in order, then fails. */
function scripted(...outcomes: Outcome[]) {
  const calls: number[] = [];
  const connect = vi.fn(async (): Promise<ServerLink> => {
    calls.push(Date.now());
    const next = outcomes.shift() ?? new Error("no more servers");
    if (next instanceof Error) throw next;
    return next;
  });
  return { connect, calls };
}

const SYNC = 1_000;
const CAP = 8_000;

function clientSet(connect: () => Promise<ServerLink>, random = () => 0.5) {
  const metrics = new AgentMetrics();
  const set = new ClientSet({
    connect,
    syncIntervalMs: SYNC,
    syncIntervalCapMs: CAP,
    random,
    log: silentLogger(),
    metrics,
  });
  const gauge = async (g: "openServerConnections" | "knownServerCount") =>
    (await metrics[g].get()).values[0]?.value;
  return { set, metrics, gauge };
}

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe("ClientSet", () => {
  it("connects until it holds serverCount distinct servers, closing duplicates", async () => {
    const a = new FakeLink("A", 2);
    const dup = new FakeLink("A", 2);
    const b = new FakeLink("B", 2);
    const { connect, calls } = scripted(a, dup, b);
    const { set, gauge } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(set.state()).toMatchObject({ connectedServers: ["A"], targetServerCount: 2 });
    expect(set.ready).toBe(true);

    await vi.advanceTimersByTimeAsync(SYNC); // after a new server: --sync-interval
    expect(dup.closedWith).toBe("duplicate server");
    await vi.advanceTimersByTimeAsync(500); // after a duplicate: backoff, 0.5 of the first 1s window
    expect(set.state().connectedServers).toEqual(["A", "B"]);
    expect(calls).toEqual([0, 1_000, 1_500]);

    // Complete: nothing is scheduled any more.
    expect(vi.getTimerCount()).toBe(0);
    expect(await gauge("openServerConnections")).toBe(2);
    expect(await gauge("knownServerCount")).toBe(2);
    await set.stop();
  });

  it("backs off with jitter between failures, up to the cap", async () => {
    const { connect, calls } = scripted(new Error("refused"), new Error("refused"), new Error("refused"));
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(20_000);
    // Delays 0.5 × 1s, 2s, 4s, 8s, 8s, ...
    expect(calls.slice(0, 6)).toEqual([0, 500, 1_500, 3_500, 7_500, 11_500]);
    expect(set.ready).toBe(false);
    await set.stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  it("reconnects after losing a server, with the backoff reset by the last success", async () => {
    const a = new FakeLink("A", 1);
    const a2 = new FakeLink("A", 1);
    const { connect, calls } = scripted(new Error("refused"), new Error("refused"), a, a2);
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(1_500);
    expect(set.ready).toBe(true);
    expect(calls).toEqual([0, 500, 1_500]);
    expect(vi.getTimerCount()).toBe(0);

    await vi.advanceTimersByTimeAsync(10_000);
    a.close("stream ended");
    expect(set.ready).toBe(false);
    await vi.advanceTimersByTimeAsync(500); // first window again, not the grown one
    expect(calls.at(-1)).toBe(12_000);
    expect(set.state().connectedServers).toEqual(["A"]);
    await set.stop();
  });

  it("reconnects within --sync-interval after losing its last server, however many duplicates came first", async () => {
    // Told of two servers, it keeps reaching the one it holds: duplicates, spaced out more and more.
    const a = new FakeLink("A", 2);
    const dups = Array.from({ length: 5 }, () => new FakeLink("A", 2));
    const b = new FakeLink("B", 2);
    const { connect, calls } = scripted(a, ...dups, b);
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(dups.every((d) => d.closedWith === "duplicate server")).toBe(true);
    // Delays after each duplicate: 0.5 × 1 s, 2 s, 4 s, 8 s: paced, not every second.
    expect(calls).toEqual([0, 1_000, 1_500, 2_500, 4_500, 8_500]);

    const lostAt = Date.now();
    a.close("stream ended"); // its only server died
    expect(set.ready).toBe(false);
    await vi.advanceTimersByTimeAsync(SYNC);
    // Within the first window (0.5 × 1 s here), not after the grown one (up to 8 s).
    expect(calls.filter((t) => t > lostAt)).toEqual([lostAt + 500]);
    expect(set.state().connectedServers).toEqual(["B"]);
    await set.stop();
  });

  it("with no server, joins an unanswered attempt with another after a second, up to three at once", async () => {
    // The first two land on a frozen server (no answer until their handshake timeout), the third on a live one.
    let failFrozen!: () => void;
    const frozen = new Promise<FakeLink>((_resolve, reject) => {
      failFrozen = () => reject(new Error("no response headers within 5000ms"));
    });
    const b = new FakeLink("B", 1);
    const { connect, calls } = scripted(frozen, frozen, b);
    const { set, metrics } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(calls).toEqual([0]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(calls).toEqual([0, 1_000]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(calls).toEqual([0, 1_000, 2_000]);
    expect(set.state().connectedServers).toEqual(["B"]);
    expect((await metrics.serverConnectHedges.get()).values[0]?.value).toBe(2);
    // Connected: the frozen attempts time out without another hedge or retry.
    failFrozen();
    await vi.advanceTimersByTimeAsync(30_000);
    expect(calls).toHaveLength(3);
    expect(vi.getTimerCount()).toBe(0);
    await set.stop();
  });

  it("does not hedge while it holds a server", async () => {
    const a = new FakeLink("A", 2);
    let fail!: () => void;
    const slow = new Promise<FakeLink>((_resolve, reject) => {
      fail = () => reject(new Error("no response headers within 5000ms"));
    });
    const { connect, calls } = scripted(a, slow);
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(SYNC + 4_000);
    expect(calls).toEqual([0, SYNC]);
    fail();
    await set.stop();
  });

  it("follows the highest serverCount among connected servers", async () => {
    const a = new FakeLink("A", 3);
    const b = new FakeLink("B", 1);
    const { connect } = scripted(a, b);
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(SYNC);
    expect(set.state()).toMatchObject({ connectedServers: ["A", "B"], targetServerCount: 3 });
    a.close("scaled down");
    expect(set.state()).toMatchObject({ connectedServers: ["B"], targetServerCount: 1 });
    expect(vi.getTimerCount()).toBe(0);
    await set.stop();
  });

  it("follows a serverCount its server announces later: connects to the servers now wanted", async () => {
    // Joined a fleet still starting: told 1, then the fleet grows to 2.
    const a = new FakeLink("A", 1);
    const b = new FakeLink("B", 2);
    const { connect, calls } = scripted(a, b);
    const { set, gauge } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(set.state()).toMatchObject({ connectedServers: ["A"], targetServerCount: 1 });
    expect(calls).toEqual([0]); // complete: nothing more

    a.announce(2);
    expect(set.state().targetServerCount).toBe(2);
    expect(await gauge("knownServerCount")).toBe(2);
    await vi.advanceTimersByTimeAsync(SYNC);
    expect(calls).toEqual([0, 60_500]); // at once, jittered within --sync-interval
    expect(set.state().connectedServers).toEqual(["A", "B"]);

    // A smaller fleet lowers the target; the streams held go on.
    a.announce(1);
    b.announce(1);
    expect(set.state()).toMatchObject({ connectedServers: ["A", "B"], targetServerCount: 1 });
    await set.stop();
  });

  it("drain sends DRAIN to every server and stops connecting, even after a loss", async () => {
    const a = new FakeLink("A", 3);
    const b = new FakeLink("B", 3);
    const { connect, calls } = scripted(a, b);
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(SYNC);
    set.drain();
    expect([a.drained, b.drained]).toEqual([true, true]);
    b.close("stream ended");
    await vi.advanceTimersByTimeAsync(60_000);
    expect(calls).toHaveLength(2);
    expect(set.state()).toMatchObject({ connectedServers: ["A"], draining: true });
    await set.stop();
  });

  it("reports the total load of its servers", async () => {
    const a = new FakeLink("A", 2);
    const b = new FakeLink("B", 2);
    const { connect } = scripted(a, b);
    const { set } = clientSet(connect);
    const loads: number[] = [];
    set.on("load", (l) => loads.push(l));
    set.start();
    await vi.advanceTimersByTimeAsync(SYNC);
    a.setLoad(2);
    b.setLoad(1);
    a.setLoad(0);
    b.close("gone");
    expect(loads).toEqual([2, 3, 1, 0]);
    await set.stop();
  });

  it("stop closes every server and a connection that completes after it", async () => {
    const a = new FakeLink("A", 2);
    let finish!: (l: FakeLink) => void;
    const late = new FakeLink("B", 2);
    const { connect } = scripted(a, new Promise<FakeLink>((r) => (finish = r)));
    const { set } = clientSet(connect);
    set.start();
    await vi.advanceTimersByTimeAsync(SYNC);
    const stopped = set.stop();
    expect(a.closedWith).toBe("agent stopping");
    finish(late);
    await stopped;
    expect(late.closedWith).toBe("agent stopping");
    expect(set.state()).toMatchObject({ connectedServers: [], stopped: true });
    expect(vi.getTimerCount()).toBe(0);
  });
});
