/** A tenant's egress policy in its record: set, stored, read back, and refused when damaged. */
import { describe, expect, it } from "vitest";
import { DEFAULT_EGRESS_POLICY } from "../../lib/egress/egress-policy.js";
import { createTenantRecord, deleteTenantRecord, setEgressPolicy } from "../../lib/tenancy/operations.js";
import { decodeTenantRecord, encodeTenantRecord } from "../../lib/tenancy/record-codec.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const T1 = new Date("2026-12-04T11:00:00.000Z");
const SOURCE = { location: "tenants/acme.json", tenantId: "acme" };
const fresh = () => ({ ...createTenantRecord({ id: "acme" }, undefined, T0), version: 1 });
const POLICY = {
  allow: ["10.0.0.0/8:443,10250", "*.svc.cluster.local:443"],
  allowLoopback: false,
  allowLinkLocal: false,
};

describe("a tenant's egress policy", () => {
  it("a new tenant gets the default, which is not written, so older gateways still read the record", () => {
    const r = fresh();
    expect(r.egress).toEqual(DEFAULT_EGRESS_POLICY);
    const text = encodeTenantRecord(r);
    expect(JSON.parse(text)).not.toHaveProperty("egress");
    expect(decodeTenantRecord(text, SOURCE).egress).toEqual(DEFAULT_EGRESS_POLICY);
  });

  it("is set in canonical form and read back", () => {
    const r = setEgressPolicy(
      fresh(),
      { ...POLICY, allow: ["10.0.0.0/8:443,10250", "*.SVC.cluster.local.:443"] },
      T1,
    );
    expect(r.egress).toEqual(POLICY);
    expect(r.updatedAt).toBe(T1.toISOString());
    const back = decodeTenantRecord(encodeTenantRecord(r), SOURCE);
    expect(back.egress).toEqual(POLICY);
    expect(Object.isFrozen(back.egress.allow)).toBe(true);
  });

  it("a bad rule is refused as bad input, naming the rule; a deleted tenant has no policy to set", () => {
    expect(() => setEgressPolicy(fresh(), { ...POLICY, allow: ["10.0.0.0/40"] }, T1)).toThrow(
      expect.objectContaining({
        code: "ERR_BAD_REQUEST",
        message: expect.stringContaining("10.0.0.0/40"),
      }),
    );
    const deleted = deleteTenantRecord(setEgressPolicy(fresh(), POLICY, T1), T1);
    expect(deleted.egress).toEqual(DEFAULT_EGRESS_POLICY);
    expect(() => setEgressPolicy(deleted, POLICY, T1)).toThrow(
      expect.objectContaining({ code: "ERR_NOT_FOUND" }),
    );
  });

  const stored = (egress: unknown) => JSON.stringify({ schema: 1, ...fresh(), egress });
  it.each([
    ["not an object", "open"],
    ["an unknown key", { ...POLICY, denyAll: true }],
    ["a bad rule", { ...POLICY, allow: ["10.0.0.0/99"] }],
    ["a rule not in canonical form", { ...POLICY, allow: ["10.1.2.3"] }],
    ["a flag that is not a boolean", { ...POLICY, allowLoopback: "true" }],
    ["rules that are not a list", { ...POLICY, allow: "10.0.0.0/8" }],
  ])("a stored policy with %s is a corrupt record", (_name, egress) => {
    expect(() => decodeTenantRecord(stored(egress), SOURCE)).toThrow(
      expect.objectContaining({ code: "ERR_STORE_CORRUPT" }),
    );
  });
});
