/** Tenants' quotas: the stored overrides, and the book that enforces them per instance. */
import { describe, expect, it } from "vitest";
import { tenantQuotas } from "../../lib/server/policy/tenant-quotas.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import { createTenantRecord, deleteTenantRecord, setQuotas } from "../../lib/tenancy/operations.js";
import { effectiveQuotas, validateQuotas } from "../../lib/tenancy/quotas.js";
import { decodeTenantRecord, encodeTenantRecord } from "../../lib/tenancy/record-codec.js";
import {
  CONNECTION_WINDOW_BYTES,
  ConnectionCredit,
  MAX_DATA_PACKET_BYTES,
  OPEN_WINDOW_AFTER_BYTES,
  RECEIVE_WINDOW_BYTES,
} from "../../lib/tunnel/flow-control.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const DEFAULTS = { maxTunnels: 3, dialsPerSecond: 10, dialBurst: 5, maxAgents: 2, maxBufferedMiB: 64 };
const fresh = (id = "acme") => ({ ...createTenantRecord({ id }, undefined, T0), version: 1 });

describe("quota overrides in the tenant record", () => {
  it("none by default, not written, so older gateways still read the record", () => {
    const r = fresh();
    expect(r.quotas).toEqual({});
    expect(JSON.parse(encodeTenantRecord(r))).not.toHaveProperty("quotas");
    expect(decodeTenantRecord(encodeTenantRecord(r), { location: "x", tenantId: "acme" }).quotas).toEqual({});
  });

  it("set, dropped back to the default with null, and read back", () => {
    let r = setQuotas(fresh(), { maxTunnels: 500, dialsPerSecond: 20 }, T0);
    expect(r.quotas).toEqual({ maxTunnels: 500, dialsPerSecond: 20 });
    r = setQuotas(r, { dialsPerSecond: null }, T0);
    expect(decodeTenantRecord(encodeTenantRecord(r), { location: "x", tenantId: "acme" }).quotas).toEqual({
      maxTunnels: 500,
    });
    expect(effectiveQuotas(r.quotas, DEFAULTS)).toEqual({ ...DEFAULTS, maxTunnels: 500 });
  });

  it.each([
    [{ maxTunnels: 0 }, "maxTunnels must be an integer from 1"],
    [{ dialsPerSecond: 1.5 }, "dialsPerSecond must be an integer"],
    [{ maxAgents: 20_001 }, "to 20000"],
    [{ dialBurst: "5" }, "dialBurst must be an integer"],
    [{ bytes: 1 }, "unknown quota"],
  ])("refuses %j", (q, why) => {
    expect(() => validateQuotas(q)).toThrow(why);
    expect(() => setQuotas(fresh(), q as never, T0)).toThrow(
      expect.objectContaining({ code: "ERR_BAD_REQUEST" }),
    );
    const stored = JSON.stringify({ schema: 1, ...fresh(), quotas: q });
    expect(() => decodeTenantRecord(stored, { location: "x", tenantId: "acme" })).toThrow(
      expect.objectContaining({ code: "ERR_STORE_CORRUPT" }),
    );
  });
});

describe("the quota book", () => {
  function book(records: Record<string, TenantRecord>) {
    let clock = 0;
    const refusals: string[] = [];
    const q = tenantQuotas({
      lookup: (id) => records[id],
      defaults: DEFAULTS,
      refused: (quota) => refusals.push(quota),
      now: () => clock,
    });
    return { q, refusals, advance: (ms: number) => (clock += ms) };
  }
  const quotaOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return { code: (err as { code: string }).code, quota: (err as { quota: string }).quota };
    }
    return null;
  };

  it("counts tunnels per tenant and gives the slot back once", () => {
    const { q, refusals } = book({ acme: fresh("acme"), globex: fresh("globex") });
    const held = [q.acquireTunnel("acme"), q.acquireTunnel("acme"), q.acquireTunnel("acme")];
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "maxTunnels" });
    // Another tenant is not affected.
    expect(quotaOf(() => q.acquireTunnel("globex"))).toBeNull();
    held[0]!.release();
    held[0]!.release(); // twice gives back one slot, not two
    expect(quotaOf(() => q.acquireTunnel("acme"))).toBeNull();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "maxTunnels" });
    expect(refusals).toEqual(["maxTunnels", "maxTunnels"]);
  });

  it("limits the dial rate with a bucket: the burst at once, then the sustained rate", () => {
    const { q, advance } = book({ acme: setQuotas(fresh(), { maxTunnels: 1000 }, T0) });
    for (let i = 0; i < 5; i++) q.acquireTunnel("acme").release();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "dialsPerSecond" });
    advance(100); // 10/s: one more token
    expect(quotaOf(() => q.acquireTunnel("acme"))).toBeNull();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "dialsPerSecond" });
    advance(60_000); // never above the burst
    for (let i = 0; i < 5; i++) q.acquireTunnel("acme").release();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "dialsPerSecond" });
  });

  it("reads the limits at each check: a change in the store applies to the next dial", () => {
    const records = { acme: fresh() };
    const { q } = book(records);
    for (let i = 0; i < 3; i++) q.acquireTunnel("acme");
    expect(quotaOf(() => q.acquireTunnel("acme"))?.quota).toBe("maxTunnels");
    records.acme = setQuotas(records.acme, { maxTunnels: 4 }, T0);
    expect(quotaOf(() => q.acquireTunnel("acme"))).toBeNull();
  });

  it("limits agents per tenant", () => {
    const { q } = book({ acme: fresh(), big: setQuotas(fresh("big"), { maxAgents: 10 }, T0) });
    expect(quotaOf(() => q.admitAgent("acme", 1))).toBeNull();
    expect(quotaOf(() => q.admitAgent("acme", 2))).toEqual({ code: "ERR_QUOTA", quota: "maxAgents" });
    expect(quotaOf(() => q.admitAgent("big", 9))).toBeNull();
  });

  it("a deleted tenant's record falls back to the defaults (its dials are refused elsewhere)", () => {
    const { q } = book({ acme: deleteTenantRecord(fresh(), T0) });
    for (let i = 0; i < 3; i++) q.acquireTunnel("acme");
    expect(quotaOf(() => q.acquireTunnel("acme"))?.quota).toBe("maxTunnels");
  });
});

describe("a tenant's bytes in flight", () => {
  const MIB = 1024 * 1024;
  const fixed = (maxBufferedMiB: number) => {
    const refusals: string[] = [];
    const q = tenantQuotas({
      lookup: () => setQuotas(fresh(), { maxTunnels: 1000, dialBurst: 1000, maxBufferedMiB }, T0),
      defaults: DEFAULTS,
      refused: (quota) => refusals.push(quota),
      now: () => 0,
    });
    return { q, refusals };
  };

  it("each tunnel holds its base window; past the budget a dial is refused, naming the quota", () => {
    const { q, refusals } = fixed(8); // four 2 MiB base windows
    const slots = [1, 2, 3, 4].map(() => q.acquireTunnel("acme"));
    expect(() => q.acquireTunnel("acme")).toThrow(
      expect.objectContaining({ code: "ERR_QUOTA", quota: "maxBufferedMiB" }),
    );
    expect(refusals).toEqual(["maxBufferedMiB"]);
    slots[0]!.release();
    expect(() => q.acquireTunnel("acme")).not.toThrow();
  });

  it("windows grow from what is left, partly when little is, and give it back when they close", () => {
    const { q } = fixed(8);
    const a = q.acquireTunnel("acme");
    const b = q.acquireTunnel("acme"); // 4 MiB held in base windows
    expect(a.windowBudget!.take(3 * MIB)).toBe(3 * MIB);
    expect(b.windowBudget!.take(3 * MIB)).toBe(1 * MIB); // only 1 MiB left
    expect(b.windowBudget!.take(MIB)).toBe(0);
    expect(() => q.acquireTunnel("acme")).toThrow(expect.objectContaining({ quota: "maxBufferedMiB" }));
    a.windowBudget!.give(3 * MIB);
    expect(() => q.acquireTunnel("acme")).not.toThrow();
  });
});

describe("ConnectionCredit with a window budget", () => {
  it("opens and grows its window only by what the budget grants, and returns it on cancel", () => {
    let free = 3 * 1024 * 1024;
    const budget = {
      take: (n: number) => {
        const g = Math.min(n, free);
        free -= g;
        return g;
      },
      give: (n: number) => {
        free += n;
      },
    };
    const granted: number[] = [];
    const credit = new ConnectionCredit((b) => granted.push(b), { initial: 4 * 1024 * 1024, budget });
    credit.openWindow(); // wants +2 MiB over the protocol's 2 MiB
    expect(granted).toEqual([2 * 1024 * 1024]);
    expect(credit.receiveWindow).toBe(4 * 1024 * 1024);
    expect(free).toBe(1024 * 1024);
    credit.cancel();
    expect(free).toBe(3 * 1024 * 1024);
    const starved = new ConnectionCredit((b) => granted.push(b), {
      initial: 4 * 1024 * 1024,
      budget: { take: () => 0, give: () => {} },
    });
    starved.openWindow();
    expect(starved.receiveWindow).toBe(2 * 1024 * 1024);
    expect(granted).toHaveLength(1);
  });
});

describe("maxBufferedMiB counts bytes in flight: what each tunnel's window lets its agent send unasked", () => {
  const MIB = 1024 * 1024;
  /** A tunnel as the server opens one: its slot, then its receive window (agent-session.ts). */
  function tunnel(q: ReturnType<typeof tenantQuotas>) {
    const slot = q.acquireTunnel("acme");
    const credit = new ConnectionCredit(() => {}, {
      budget: slot.windowBudget!,
      openAfterBytes: OPEN_WINDOW_AFTER_BYTES,
    });
    credit.openWindow();
    return { slot, credit };
  }
  const book = (maxBufferedMiB: number) =>
    tenantQuotas({
      lookup: () => setQuotas(fresh(), { maxTunnels: 1000, dialBurst: 1000, maxBufferedMiB }, T0),
      defaults: DEFAULTS,
      refused: () => {},
      now: () => 0,
    });

  it("admits maxBufferedMiB / 2 idle tunnels: an idle tunnel holds only the protocol's 2 MiB window", () => {
    const q = book(4);
    const idle = [tunnel(q), tunnel(q)];
    expect(idle.map((t) => t.credit.receiveWindow)).toEqual([
      CONNECTION_WINDOW_BYTES,
      CONNECTION_WINDOW_BYTES,
    ]);
    expect(() => tunnel(q)).toThrow(expect.objectContaining({ quota: "maxBufferedMiB" }));
    const big = book(64);
    expect(Array.from({ length: 32 }, () => tunnel(big))).toHaveLength(32);
  });

  it("opens a tunnel's window once it carries data, from what the budget has left", () => {
    const q = book(8);
    const a = tunnel(q);
    const b = tunnel(q);
    a.credit.received(OPEN_WINDOW_AFTER_BYTES);
    expect(a.credit.receiveWindow).toBe(RECEIVE_WINDOW_BYTES);
    // 2 + 2 + 2 MiB held: room for one more base window, none for b to open as well.
    const c = tunnel(q);
    b.credit.received(OPEN_WINDOW_AFTER_BYTES);
    expect(b.credit.receiveWindow).toBe(CONNECTION_WINDOW_BYTES);
    expect(() => tunnel(q)).toThrow(expect.objectContaining({ quota: "maxBufferedMiB" }));
    a.credit.cancel();
    a.slot.release();
    c.slot.release();
    expect(() => tunnel(q)).not.toThrow();
  });

  it("stalled readers hold at most the budget: no window grows past it, and a sender past its window breaks the rules", () => {
    const q = book(4);
    const stalled = [tunnel(q), tunnel(q)];
    let held = 0;
    for (const t of stalled) {
      // Nothing is read (released): every byte the agent may send stays here.
      for (let sent = 0; t.credit.received(MAX_DATA_PACKET_BYTES); sent += MAX_DATA_PACKET_BYTES) {
        if (sent > 64 * MIB) throw new Error("the window never closed");
      }
      held += t.credit.receiveWindow;
    }
    expect(held).toBe(4 * MIB);
  });
});
