/**
 * The keepers the server runs on top of a registry: LeaseKeeper, OwnershipWriter and Sweeper,
 * against the embedded registry behind a switch that can make it unreachable. Lease expiry is
 * judged by an injected clock, heartbeats counted per interval on fake timers; everything else
 * is polled, never slept on.
 * registry-dynamo.test.ts runs the outage scenario again against dynalite.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { LEASE_SAFETY_MARGIN_MS } from "../../lib/registry/durations.js";
import { RegistryUnavailableError } from "../../lib/registry/errors.js";
import type { FleetRegistry } from "../../lib/registry/fleet-registry.js";
import { LeaseKeeper, readyOnLease } from "../../lib/registry/lease-keeper.js";
import { OwnershipWriter } from "../../lib/registry/ownership-writer.js";
import { Sweeper } from "../../lib/registry/sweeper.js";
import { MemoryRegistry } from "../helpers/memory-registry.js";
import { lease, row, T0 } from "./registry.contract.js";

/** A registry that can be switched off, and counts the calls that reached it. */
function switchable(inner: FleetRegistry) {
  const calls: string[] = [];
  let down = false;
  const registry = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function" || prop === "close") return value;
      return async (...args: unknown[]) => {
        if (down) throw new RegistryUnavailableError(`${String(prop)}: connect ECONNREFUSED (switched off)`);
        calls.push(String(prop));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    registry,
    calls,
    setDown(v: boolean) {
      down = v;
    },
  };
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const cleanups: (() => unknown)[] = [];

/**
 * Timers (the keepers' heartbeat and backoff) on vitest's fake clock for the rest of the test,
 * real again after its cleanups; the keepers' own clock stays the injected `clock`.
 */
function useFakeTimers(): void {
  vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval"] });
  cleanups.unshift(() => vi.useRealTimers());
}
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("LeaseKeeper", () => {
  let now = T0;
  const clock = () => now;

  function keeper(registry: FleetRegistry, over: Partial<ConstructorParameters<typeof LeaseKeeper>[0]> = {}) {
    const k = new LeaseKeeper({
      registry,
      instanceId: "i1",
      peerAddress: "10.0.0.1:8135",
      incarnation: 100,
      heartbeatMs: 20,
      leaseMs: 3_000,
      clock,
      ...over,
    });
    cleanups.push(() => k.stop());
    return k;
  }

  afterEach(() => {
    now = T0;
  });

  it("refuses a lease shorter than three heartbeats", () => {
    const registry = new MemoryRegistry();
    expect(() => keeper(registry, { heartbeatMs: 1_000, leaseMs: 2_999 })).toThrow(/three|3 heartbeats/);
  });

  it("holds its lease from the first heartbeat and renews it, one write per interval", async () => {
    // Heartbeats on fake timers, every interval exactly (no jitter): counted per interval.
    useFakeTimers();
    const { registry, calls } = switchable(new MemoryRegistry({ clock }));
    const k = keeper(registry, { agents: () => 42, random: () => 0 });
    const beats = () => calls.filter((c) => c === "heartbeat").length;
    let acquired = 0;
    k.on("acquired", () => acquired++);
    expect(k.held()).toBe(false);
    k.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(k.held()).toBe(true);
    const [l] = (await registry.listInstances()).items;
    expect(l).toMatchObject({
      instanceId: "i1",
      incarnation: 100,
      agents: 42,
      draining: false,
      expiresAt: T0 + 3_000,
    });
    expect(k.state()).toMatchObject({
      held: true,
      heldUntil: T0 + 3_000 - LEASE_SAFETY_MARGIN_MS,
      consecutiveFailures: 0,
    });
    expect(beats()).toBe(1);
    await vi.advanceTimersByTimeAsync(19);
    expect(beats()).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(beats()).toBe(2);
    await vi.advanceTimersByTimeAsync(4 * 20);
    expect(beats()).toBe(6);
    expect(acquired).toBe(1);
  });

  it("stops counting itself the holder before readers would, keeps trying while down, and recovers", async () => {
    const sw = switchable(new MemoryRegistry({ clock }));
    const k = keeper(sw.registry);
    const acquired: number[] = [];
    k.on("acquired", () => acquired.push(now));
    k.start();
    await until(() => k.held());
    sw.setDown(true);
    await until(() => k.state().consecutiveFailures >= 3);
    const degraded = k.state();
    expect(degraded.lastError).toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
    expect(degraded.failingSince).toBe(T0);
    // Still within the lease it last wrote: held, minus the safety margin.
    now = T0 + 3_000 - LEASE_SAFETY_MARGIN_MS - 1;
    expect(k.held()).toBe(true);
    now += 1;
    expect(k.held()).toBe(false);
    sw.setDown(false);
    await until(() => k.held());
    expect(k.state()).toMatchObject({ consecutiveFailures: 0, failingSince: null, lastError: null });
    // Regained after losing it: "acquired" again, so the ownership writer re-claims its rows.
    expect(acquired).toEqual([T0, now]);
  });

  it("stays ready through a hung heartbeat past its lease, as through a refused one", async () => {
    // Heartbeats wait on a gate while hung: sent, never answered, as to a wedged endpoint.
    const inner = new MemoryRegistry({ clock });
    let hung = false;
    let answer: (() => void) | undefined;
    const registry = new Proxy(inner, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (prop !== "heartbeat") return value;
        return async (...args: Parameters<FleetRegistry["heartbeat"]>) => {
          if (hung) await new Promise<void>((r) => (answer = r));
          return target.heartbeat(...args);
        };
      },
    });
    const k = keeper(registry);
    cleanups.push(() => {
      hung = false;
      answer?.();
    });
    k.start();
    await until(() => k.held());
    hung = true;
    await until(() => answer !== undefined);
    const sent = k.state().outstandingSince;
    expect(sent).not.toBeNull();
    // The lease it last wrote runs out with the heartbeat still unanswered: no failure counted
    // yet, and still ready, judged as of the last good write.
    now = T0 + 3_000;
    expect(k.state()).toMatchObject({ held: false, consecutiveFailures: 0 });
    expect(readyOnLease(k.state())).toBe(true);
    // The same state with no heartbeat outstanding, or one sent only after the lease ran out
    // (this process stalled, not the registry): not ready.
    expect(readyOnLease({ ...k.state(), outstandingSince: null })).toBe(false);
    expect(readyOnLease({ ...k.state(), outstandingSince: now })).toBe(false);
    expect(readyOnLease({ ...k.state(), lost: true })).toBe(false);
    hung = false;
    answer?.();
    await until(() => k.held());
    expect(readyOnLease(k.state())).toBe(true);
  });

  it("writes draining at once, and ends the lease on stop", async () => {
    const registry = new MemoryRegistry({ clock });
    const k = keeper(registry, { heartbeatMs: 60_000, leaseMs: 180_000 });
    k.start();
    await until(() => k.held());
    await k.setDraining();
    expect((await registry.listInstances()).items[0]).toMatchObject({ draining: true });
    now += 5;
    await k.stop();
    expect((await registry.listInstances()).items[0]).toMatchObject({ draining: true, expiresAt: T0 + 5 });
    expect(k.held()).toBe(false);
  });

  it("reports 'lost' once and stops when a newer incarnation of its id takes the lease", async () => {
    useFakeTimers();
    const { registry, calls } = switchable(new MemoryRegistry({ clock }));
    const k = keeper(registry, { random: () => 0 });
    const lost: Error[] = [];
    k.on("lost", (e) => lost.push(e));
    k.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(k.held()).toBe(true);
    await registry.heartbeat(lease("i1", { incarnation: 200, heartbeatAt: T0 }));
    await vi.advanceTimersByTimeAsync(20);
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ name: "LeaseLostError", code: "ERR_CONFLICT" });
    expect(k.state()).toMatchObject({ lost: true, held: false });
    // Stopped: nothing scheduled, and a hundred intervals on, not one more call.
    expect(vi.getTimerCount()).toBe(0);
    const calledBefore = calls.length;
    await vi.advanceTimersByTimeAsync(100 * 20);
    expect(calls.length).toBe(calledBefore);
    expect(lost).toHaveLength(1);
    // Its stop does not end the newer incarnation's lease.
    await k.stop();
    expect((await registry.listInstances()).items[0]).toMatchObject({ incarnation: 200, draining: false });
  });
});

describe("OwnershipWriter", () => {
  function writer(
    registry: FleetRegistry,
    over: Partial<ConstructorParameters<typeof OwnershipWriter>[0]> = {},
  ) {
    const w = new OwnershipWriter({ registry, instanceId: "i1", incarnation: 100, clock: () => T0, ...over });
    cleanups.push(() => w.close());
    return w;
  }
  const agentsIn = async (registry: FleetRegistry, tenant: string) =>
    (await registry.ownersOf(tenant)).items.map((r) => `${r.agentId}.${r.session}`).sort();

  it("claims on connect and releases on disconnect, in the background", async () => {
    const registry = new MemoryRegistry({ clock: () => T0 });
    const w = writer(registry);
    const a = w.claimed("acme", "a");
    const b = w.claimed("acme", "b");
    expect([a.session, b.session]).toEqual([1, 2]);
    expect(await w.flush(5_000)).toBe(true);
    expect(await agentsIn(registry, "acme")).toEqual(["a.1", "b.2"]);
    w.released(a);
    expect(await w.flush(5_000)).toBe(true);
    expect(await agentsIn(registry, "acme")).toEqual(["b.2"]);
  });

  it("ignores the late release of a stream the agent has since replaced", async () => {
    const registry = new MemoryRegistry({ clock: () => T0 });
    const w = writer(registry);
    const first = w.claimed("acme", "a");
    await w.flush(5_000);
    const second = w.claimed("acme", "a");
    w.released(first);
    await w.flush(5_000);
    expect(await agentsIn(registry, "acme")).toEqual([`a.${second.session}`]);
  });

  it("never blocks a connect while the registry is down, coalesces, and catches up when it returns", async () => {
    const sw = switchable(new MemoryRegistry({ clock: () => T0 }));
    const w = writer(sw.registry);
    const gone = w.claimed("acme", "gone");
    await w.flush(5_000);
    sw.setDown(true);
    // claimed() and released() return at once, with the row: the writes are the writer's to
    // make in the background, so a connect never waits on the registry.
    const stays = w.claimed("acme", "stays");
    const flicker = w.claimed("acme", "flicker");
    w.released(flicker);
    w.released(gone);
    expect(w.state()).toMatchObject({ pendingClaims: 1, pendingReleases: 1 });
    await until(() => w.state().consecutiveFailures >= 2);
    expect(w.state()).toMatchObject({ pendingClaims: 1, pendingReleases: 1 });
    expect(w.state().lastError).toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
    sw.calls.length = 0;
    sw.setDown(false);
    expect(await w.flush(10_000)).toBe(true);
    expect(await agentsIn(sw.registry, "acme")).toEqual([`stays.${stays.session}`]);
    // The agent that came and went during the outage cost no write at all.
    expect(sw.calls.filter((c) => c === "claim" || c === "release").length).toBeLessThanOrEqual(3);
    expect(w.state()).toMatchObject({ pendingClaims: 0, pendingReleases: 0, consecutiveFailures: 0 });
  });

  it("drops the oldest deletions past its bound, and still deletes every row after the outage", async () => {
    const sw = switchable(new MemoryRegistry({ clock: () => T0 }));
    const w = writer(sw.registry, { maxPendingReleases: 2 });
    const rows = ["a", "b", "c", "d", "e"].map((id) => w.claimed("acme", id));
    await w.flush(5_000);
    sw.setDown(true);
    for (const r of rows) w.released(r);
    await until(() => w.state().droppedReleases === 3);
    expect(w.state()).toMatchObject({ pendingReleases: 2, pendingClaims: 0 });
    sw.setDown(false);
    await until(async () => (await agentsIn(sw.registry, "acme")).length === 0, 10_000);
  });

  it("bounds pending deletions at O(1) per release, never scanning what is pending", async () => {
    // Writes hang (sent, never answered) once `hung`: the queue only grows, as in an outage.
    const inner = new MemoryRegistry({ clock: () => T0 });
    let hung = false;
    const registry = new Proxy(inner, {
      get(target, prop, receiver) {
        const value = Reflect.get(target, prop, receiver);
        if (hung && (prop === "claim" || prop === "release")) return () => new Promise(() => {});
        return value;
      },
    });
    // The writer reads the clock for every key it looks at that is due a re-stamp (is its row
    // old enough?): a scan of the pending queue shows as thousands of reads per release.
    let now = T0;
    let clockReads = 0;
    const clock = () => {
      clockReads++;
      return now;
    };
    const w = writer(registry, { maxPendingReleases: 100, clock, concurrency: 4 });
    const dropped: string[] = [];
    w.on("dropped", (r) => dropped.push(r.agentId));
    const leaving = Array.from({ length: 1_000 }, (_, i) => w.claimed("acme", `gone-${i}`));
    for (let i = 0; i < 2_000; i++) w.claimed("acme", `stays-${i}`);
    expect(await w.flush(10_000)).toBe(true);
    hung = true;
    // Two days on, every row is due a re-stamp, and the registry hangs: 3,000 writes pending,
    // the first 4 of them in flight.
    now = T0 + 2 * 86_400_000;
    w.restamp();
    clockReads = 0;
    for (const r of leaving) w.released(r);
    expect(clockReads / leaving.length).toBeLessThanOrEqual(1);
    // The oldest given up first (those in flight are kept), each reported once; 100 pending.
    expect(dropped).toEqual(leaving.slice(4, 904).map((r) => r.agentId));
    expect(w.state()).toMatchObject({ pendingReleases: 100, droppedReleases: 900 });
  });

  it("re-claims its rows when asked to resync (after a sweep or a lease regained)", async () => {
    const registry = new MemoryRegistry({ clock: () => T0 });
    const w = writer(registry);
    const a = w.claimed("acme", "a");
    await w.flush(5_000);
    await registry.release(a); // what a sweeper does while we are away
    await registry.claim(row("acme", "old", "i1", { incarnation: 50 })); // our predecessor's
    w.resync();
    expect(await w.flush(5_000)).toBe(true);
    expect(await agentsIn(registry, "acme")).toEqual([`a.${a.session}`]);
  });
});

describe("Sweeper", () => {
  it("removes only dead instances' rows and leases, after the grace period", async () => {
    let now = T0;
    const registry = new MemoryRegistry({ clock: () => now });
    await registry.heartbeat(lease("me", { heartbeatAt: T0 - 100_000 })); // ours: never swept by us
    await registry.heartbeat(lease("dead", { heartbeatAt: T0 - 50_000, incarnation: 7 }));
    await registry.heartbeat(lease("just-died", { heartbeatAt: T0 - 15_000 }));
    await registry.heartbeat(lease("draining", { heartbeatAt: T0, draining: true }));
    await registry.heartbeat(lease("live", { heartbeatAt: T0 }));
    for (const instanceId of ["me", "dead", "just-died", "draining", "live"]) {
      await registry.claim(row("acme", `agent-of-${instanceId}`, instanceId, { incarnation: 7 }));
    }
    // The dead instance restarted under the same id and wrote a row before its first heartbeat.
    await registry.claim(row("beta", "reborn", "dead", { incarnation: 9 }));
    const sweeper = new Sweeper({ registry, instanceId: "me", graceMs: 30_000, clock: () => now });
    const report = await sweeper.sweepOnce();
    expect(report).toEqual({ instances: ["dead"], rows: 1, unreadable: [] });
    expect((await registry.ownersOf("acme")).items.map((r) => r.instanceId).sort()).toEqual([
      "draining",
      "just-died",
      "live",
      "me",
    ]);
    expect((await registry.ownersOf("beta")).items.map((r) => r.agentId)).toEqual(["reborn"]);
    expect((await registry.listInstances()).items.map((l) => l.instanceId)).toEqual([
      "draining",
      "just-died",
      "live",
      "me",
    ]);
    now = T0 + 30_000;
    expect((await sweeper.sweepOnce()).instances).toEqual(["just-died"]);
  });

  it("takes nobody for dead right after an outage, when every lease in the table looks expired", async () => {
    let now = T0;
    const sw = switchable(new MemoryRegistry({ clock: () => now }));
    await sw.registry.heartbeat(lease("live", { heartbeatAt: T0 }));
    await sw.registry.claim(row("acme", "agent-of-live", "live", { incarnation: 7 }));
    const sweeper = new Sweeper({
      registry: sw.registry,
      instanceId: "me",
      graceMs: 30_000,
      clock: () => now,
    });
    sw.setDown(true);
    now = T0 + 60_000; // a minute without DynamoDB: "live" could not heartbeat
    await expect(sweeper.sweepOnce()).rejects.toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
    sw.setDown(false);
    expect(await sweeper.sweepOnce()).toEqual({ instances: [], rows: 0, unreadable: [] });
    expect((await sw.registry.ownersOf("acme")).items).toHaveLength(1);
    // Still not heartbeating a grace period after the registry came back: dead after all.
    now += 30_000;
    expect((await sweeper.sweepOnce()).instances).toEqual(["live"]);
  });

  it("sweeps on its own, jittered, and reports failures without stopping", async () => {
    const sw = switchable(new MemoryRegistry());
    const sweeper = new Sweeper({ registry: sw.registry, instanceId: "me", intervalMs: 10 });
    const failures: Error[] = [];
    let sweeps = 0;
    sweeper.on("failure", (e) => failures.push(e));
    sweeper.on("swept", () => sweeps++);
    sweeper.start();
    cleanups.push(() => sweeper.stop());
    await until(() => sweeps >= 2);
    sw.setDown(true);
    await until(() => failures.length >= 2);
    sw.setDown(false);
    const before = sweeps;
    await until(() => sweeps > before);
    expect(failures[0]).toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
  });
});
