/** The polling watch a running server reads tenants from: freshness, monotonic versions, failures. */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TenantStoreCorruptError } from "../../lib/tenancy/errors.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import { createTenantRecord } from "../../lib/tenancy/operations.js";
import { PollingTenantWatch } from "../../lib/tenancy/polling-watch.js";
import type { TenantChanges, TenantListing } from "../../lib/tenancy/store.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const rec = (id: string, version: number): TenantRecord => ({
  ...createTenantRecord({ id }, undefined, T0),
  version,
});

/** A list() that answers from a script, one step per poll, repeating the last. */
function scripted(steps: (TenantListing | Error)[]) {
  let calls = 0;
  const list = async () => {
    const step = steps[Math.min(calls, steps.length - 1)]!;
    calls++;
    if (step instanceof Error) throw step;
    return step;
  };
  return { list, calls: () => calls };
}

const listing = (...tenants: TenantRecord[]): TenantListing => ({ tenants, unreadable: [] });

const INTERVAL_MS = 5;

/** Runs `n` more polls on the fake clock, each one's result applied, and checks that many ran. */
async function polls(source: { calls: () => number }, n: number): Promise<void> {
  const expected = source.calls() + n;
  await vi.advanceTimersByTimeAsync(n * INTERVAL_MS);
  expect(source.calls()).toBe(expected);
}

describe("PollingTenantWatch", () => {
  const watches: PollingTenantWatch[] = [];
  // Polls run on the fake clock: each test says how many intervals pass, never sleeps.
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
  });
  afterEach(() => {
    for (const w of watches.splice(0)) w.close();
    vi.useRealTimers();
  });
  const watch = (list: () => Promise<TenantListing>) => {
    const w = new PollingTenantWatch(list, { intervalMs: INTERVAL_MS });
    watches.push(w);
    return w;
  };

  it("never replaces a record with an older version (a lagging read cannot undo a revocation)", async () => {
    const source = scripted([listing(rec("acme", 3)), listing(rec("acme", 2)), listing(rec("acme", 4))]);
    const w = watch(source.list);
    const seen: string[] = [];
    w.on("change", (c: TenantChanges) => seen.push(...c.changed.map((r) => `${r.id}@${r.version}`)));
    await w.ready;
    await polls(source, 3);
    expect(w.get("acme")?.version).toBe(4);
    expect(seen).toEqual(["acme@3", "acme@4"]);
  });

  it("keeps serving what it knows while the store fails, and reports each failure", async () => {
    const source = scripted([listing(rec("acme", 1)), new Error("store down"), listing(rec("acme", 1))]);
    const w = watch(source.list);
    const errors: Error[] = [];
    w.on("error", (e) => errors.push(e));
    await w.ready;
    await polls(source, 2);
    expect(errors.map((e) => e.message)).toEqual(["store down"]);
    expect(w.get("acme")?.version).toBe(1);
  });

  it("does not crash when a failure has no listener", async () => {
    const source = scripted([listing(rec("acme", 1)), new Error("nobody listens")]);
    const w = watch(source.list);
    await w.ready;
    await polls(source, 3);
    expect(w.get("acme")?.version).toBe(1);
  });

  it("reports ids that vanish from the store, but not ids that are only unreadable", async () => {
    const unreadable = new TenantStoreCorruptError("tenants/b.json", "not valid JSON", { tenantId: "b" });
    const source = scripted([
      listing(rec("a", 1), rec("b", 1), rec("c", 1)),
      { tenants: [rec("a", 1)], unreadable: [unreadable] },
    ]);
    const w = watch(source.list);
    const removed: string[] = [];
    w.on("change", (c: TenantChanges) => removed.push(...c.removed));
    w.on("error", () => {});
    await w.ready;
    await polls(source, 2);
    expect(removed).toEqual(["c"]);
    expect(w.get("b")?.version).toBe(1);
    expect(w.get("c")).toBeUndefined();
  });

  it("rejects ready when the first read fails, and stops polling once closed", async () => {
    const failing = scripted([new Error("no store")]);
    await expect(watch(failing.list).ready).rejects.toThrow("no store");
    const source = scripted([listing()]);
    const w = watch(source.list);
    await w.ready;
    await polls(source, 2);
    w.close();
    const calls = source.calls();
    expect(vi.getTimerCount()).toBe(0);
    await vi.advanceTimersByTimeAsync(100 * INTERVAL_MS);
    expect(source.calls()).toBe(calls);
  });

  it("refuses a non-positive interval", () => {
    expect(() => new PollingTenantWatch(async () => listing(), { intervalMs: 0 })).toThrow(RangeError);
  });
});
