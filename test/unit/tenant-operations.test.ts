/** The rules of tenant changes, as pure functions: rotation and grace, revocation, limits, pruning. */
import { describe, expect, it } from "vitest";
import { credentialStatus } from "../../lib/tenancy/credential-status.js";
import {
  INACTIVE_CREDENTIAL_RETENTION_MS,
  MAX_CREDENTIALS_PER_KIND,
  MAX_ROTATION_GRACE_MS,
} from "../../lib/tenancy/limits.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import {
  addAgentCertificate,
  addCallerCertificate,
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import { agentUri, callerUri } from "../../lib/tenancy/tenant-uri.js";
import { generateToken } from "../../lib/tenancy/tokens.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const at = (ms: number) => new Date(T0.getTime() + ms);
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

const fresh = (): TenantRecord => createTenantRecord({ id: "acme" }, undefined, T0);
const withAgentToken = (r: TenantRecord, now: Date, rotateGraceMs?: number) =>
  addToken(r, "agent-token", generateToken("agent", r.id), now, { rotateGraceMs });

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return (err as { code?: string }).code;
  }
  return undefined;
}

describe("creating", () => {
  it("starts from nothing, or continues the versions of a tombstone", () => {
    expect(fresh()).toMatchObject({ id: "acme", version: 0, displayName: "acme", state: "active" });
    const tombstone = { ...deleteTenantRecord(fresh(), T0), version: 7 };
    expect(createTenantRecord({ id: "acme", displayName: "Acme" }, tombstone, T0)).toMatchObject({
      version: 7,
      displayName: "Acme",
      state: "active",
    });
    expect(codeOf(() => createTenantRecord({ id: "acme" }, { ...fresh(), version: 1 }, T0))).toBe(
      "ERR_ALREADY_EXISTS",
    );
  });

  it.each([
    ["a terminal escape", "\u001b]0;pwned\u0007"],
    ["a newline", "two\nlines"],
    ["a C1 control", "a\u009bb"],
    ["a line separator", "a\u2028b"],
    ["129 characters", "x".repeat(129)],
  ])("refuses a display name with %s", (_what, displayName) => {
    expect(codeOf(() => createTenantRecord({ id: "acme", displayName }, undefined, T0))).toBe(
      "ERR_BAD_REQUEST",
    );
  });

  it("accepts a display name in any script", () => {
    expect(createTenantRecord({ id: "acme", displayName: "Ацме 製作所 🚀" }, undefined, T0).displayName).toBe(
      "Ацме 製作所 🚀",
    );
  });
});

describe("rotation", () => {
  it("limits the usable credentials of the rotated kind to the grace period, and only those", () => {
    let r = withAgentToken(fresh(), T0);
    r = addToken(r, "caller-token", generateToken("caller", "acme"), T0);
    r = withAgentToken(r, at(HOUR), DAY);
    expect(r.agentTokens.map((t) => t.expiresAt)).toEqual([at(HOUR + DAY).toISOString(), null]);
    expect(r.callerTokens[0]!.expiresAt).toBeNull();
    expect(credentialStatus(r.agentTokens[0]!, at(HOUR + DAY - 1))).toBe("expiring");
    expect(credentialStatus(r.agentTokens[0]!, at(HOUR + DAY))).toBe("expired");
  });

  it("never extends a grace already running, and leaves revoked credentials alone", () => {
    let r = withAgentToken(fresh(), T0);
    r = withAgentToken(r, T0, HOUR); // first ends at T0+1h
    r = revokeCredential(r, r.agentTokens[1]!.id, at(1));
    r = withAgentToken(r, at(2), DAY); // a longer grace must not revive or lengthen anything
    expect(r.agentTokens[0]!.expiresAt).toBe(at(HOUR).toISOString());
    expect(r.agentTokens[1]!).toMatchObject({ expiresAt: null, revokedAt: at(1).toISOString() });
  });

  it("with a grace of 0, ends the old credentials at once", () => {
    const r = withAgentToken(withAgentToken(fresh(), T0), T0, 0);
    expect(credentialStatus(r.agentTokens[0]!, T0)).toBe("expired");
    expect(credentialStatus(r.agentTokens[1]!, T0)).toBe("active");
  });

  it.each([-1, MAX_ROTATION_GRACE_MS + 1, Number.NaN, Number.POSITIVE_INFINITY])(
    "refuses a grace of %d",
    (grace) => {
      expect(codeOf(() => withAgentToken(withAgentToken(fresh(), T0), T0, grace))).toBe("ERR_BAD_REQUEST");
    },
  );
});

describe("limits and pruning", () => {
  it(`refuses a ${MAX_CREDENTIALS_PER_KIND + 1}th usable credential of a kind`, () => {
    let r = fresh();
    for (let i = 0; i < MAX_CREDENTIALS_PER_KIND; i++) r = withAgentToken(r, T0);
    expect(codeOf(() => withAgentToken(r, T0))).toBe("ERR_BAD_REQUEST");
    // Other kinds have their own budget.
    expect(addToken(r, "caller-token", generateToken("caller", "acme"), T0).callerTokens).toHaveLength(1);
  });

  it("makes room by forgetting the longest-inactive credentials first", () => {
    let r = fresh();
    for (let i = 0; i < MAX_CREDENTIALS_PER_KIND; i++) r = withAgentToken(r, T0);
    const [first, second] = r.agentTokens;
    r = revokeCredential(r, second!.id, at(2));
    r = revokeCredential(r, first!.id, at(3));
    r = withAgentToken(r, at(4));
    expect(r.agentTokens).toHaveLength(MAX_CREDENTIALS_PER_KIND);
    expect(r.agentTokens.map((t) => t.id)).not.toContain(second!.id);
    expect(r.agentTokens.map((t) => t.id)).toContain(first!.id);
  });

  it("forgets inactive credentials after the retention period", () => {
    let r = withAgentToken(fresh(), T0);
    const old = r.agentTokens[0]!.id;
    r = revokeCredential(r, old, T0);
    r = withAgentToken(r, at(INACTIVE_CREDENTIAL_RETENTION_MS - 1));
    expect(r.agentTokens.map((t) => t.id)).toContain(old);
    r = withAgentToken(r, at(INACTIVE_CREDENTIAL_RETENTION_MS + 1));
    expect(r.agentTokens.map((t) => t.id)).not.toContain(old);
  });

  it("counts a certificate past its notAfter as inactive", () => {
    const r = addCallerCertificate(
      fresh(),
      { serial: "4a", subject: "CN=acme", uri: callerUri("acme"), notAfter: at(DAY) },
      T0,
    );
    expect(credentialStatus(r.callerCertificates[0]!, at(DAY - 1))).toBe("active");
    expect(credentialStatus(r.callerCertificates[0]!, at(DAY))).toBe("expired");
  });
});

describe("revocation and deletion", () => {
  it("revokes by id, refuses an unknown id and a second revocation", () => {
    const r = withAgentToken(fresh(), T0);
    const id = r.agentTokens[0]!.id;
    const revoked = revokeCredential(r, id, at(5));
    expect(revoked.agentTokens[0]!.revokedAt).toBe(at(5).toISOString());
    expect(codeOf(() => revokeCredential(r, "0123456789abcdef", T0))).toBe("ERR_NOT_FOUND");
    expect(codeOf(() => revokeCredential(revoked, id, T0))).toBe("ERR_ALREADY_REVOKED");
  });

  it("leaves a tombstone with no credentials, on which nothing else can be done", () => {
    const tombstone = deleteTenantRecord(withAgentToken(fresh(), T0), at(1));
    expect(tombstone).toMatchObject({
      state: "deleted",
      agentTokens: [],
      agentCertificates: [],
      callerTokens: [],
      callerCertificates: [],
    });
    expect(codeOf(() => withAgentToken(tombstone, T0))).toBe("ERR_NOT_FOUND");
    expect(codeOf(() => deleteTenantRecord(tombstone, T0))).toBe("ERR_NOT_FOUND");
  });
});

describe("agent certificates", () => {
  const agentCert = (serial: string, notAfter = at(365 * DAY)) => ({
    serial,
    subject: "CN=acme, O=kgw:tenant-agent",
    uri: agentUri("acme"),
    notAfter,
  });

  it("a new tenant has none, and a tombstone drops them with everything else", () => {
    expect(fresh().agentCertificates).toEqual([]);
    const r = addAgentCertificate(fresh(), agentCert("a1"), T0);
    expect(r.agentCertificates.map((c) => c.id)).toEqual(["a1"]);
    expect(deleteTenantRecord(r, at(1)).agentCertificates).toEqual([]);
  });

  it("rotates on their own: agent tokens and caller certificates keep no grace from it", () => {
    let r = withAgentToken(fresh(), T0);
    r = addCallerCertificate(
      r,
      { serial: "c1", subject: "CN=acme", uri: callerUri("acme"), notAfter: at(DAY) },
      T0,
    );
    r = addAgentCertificate(r, agentCert("a1"), T0);
    r = addAgentCertificate(r, agentCert("a2"), at(HOUR), { rotateGraceMs: HOUR });
    expect(r.agentCertificates.map((c) => c.expiresAt)).toEqual([at(2 * HOUR).toISOString(), null]);
    expect(r.agentTokens[0]!.expiresAt).toBeNull();
    expect(r.callerCertificates[0]!.expiresAt).toBeNull();
  });

  it("are revoked by serial like any credential; ids stay unique across kinds", () => {
    const r = addAgentCertificate(fresh(), agentCert("a1"), T0);
    expect(revokeCredential(r, "a1", at(1)).agentCertificates[0]!.revokedAt).toBe(at(1).toISOString());
    // A caller certificate with the same serial would make `revoke a1` ambiguous.
    expect(
      codeOf(() =>
        addCallerCertificate(
          r,
          { serial: "a1", subject: "CN=acme", uri: callerUri("acme"), notAfter: at(DAY) },
          T0,
        ),
      ),
    ).toBe("ERR_BAD_REQUEST");
  });

  it(`have their own budget of ${MAX_CREDENTIALS_PER_KIND}, pruned like the others`, () => {
    let r = fresh();
    for (let i = 0; i < MAX_CREDENTIALS_PER_KIND; i++)
      r = addAgentCertificate(r, agentCert(`a${i.toString(16)}`), T0);
    expect(codeOf(() => addAgentCertificate(r, agentCert("ff"), T0))).toBe("ERR_BAD_REQUEST");
    expect(withAgentToken(r, T0).agentTokens).toHaveLength(1);
    r = revokeCredential(r, "a0", at(1));
    r = addAgentCertificate(r, agentCert("ff"), at(2));
    expect(r.agentCertificates.map((c) => c.id)).not.toContain("a0");
    expect(r.agentCertificates).toHaveLength(MAX_CREDENTIALS_PER_KIND);
  });
});
