/** Tenants' quotas: the stored overrides, and the book that enforces them per instance. */
import { describe, expect, it } from "vitest";
import { tenantQuotas } from "../../lib/server/policy/tenant-quotas.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import { createTenantRecord, deleteTenantRecord, setQuotas } from "../../lib/tenancy/operations.js";
import { effectiveQuotas, validateQuotas } from "../../lib/tenancy/quotas.js";
import { decodeTenantRecord, encodeTenantRecord } from "../../lib/tenancy/record-codec.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const DEFAULTS = { maxTunnels: 3, dialsPerSecond: 10, dialBurst: 5, maxAgents: 2 };
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
    [{ maxAgents: 10_001 }, "to 10000"],
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
    held[0]!();
    held[0]!(); // twice gives back one slot, not two
    expect(quotaOf(() => q.acquireTunnel("acme"))).toBeNull();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "maxTunnels" });
    expect(refusals).toEqual(["maxTunnels", "maxTunnels"]);
  });

  it("limits the dial rate with a bucket: the burst at once, then the sustained rate", () => {
    const { q, advance } = book({ acme: setQuotas(fresh(), { maxTunnels: 1000 }, T0) });
    for (let i = 0; i < 5; i++) q.acquireTunnel("acme")();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "dialsPerSecond" });
    advance(100); // 10/s: one more token
    expect(quotaOf(() => q.acquireTunnel("acme"))).toBeNull();
    expect(quotaOf(() => q.acquireTunnel("acme"))).toEqual({ code: "ERR_QUOTA", quota: "dialsPerSecond" });
    advance(60_000); // never above the burst
    for (let i = 0; i < 5; i++) q.acquireTunnel("acme")();
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
