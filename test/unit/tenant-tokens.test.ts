/** Tenant bearer tokens: their format, parsing hostile text, hashing, and verification. */
import { describe, expect, it } from "vitest";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import {
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import {
  generateToken,
  hashToken,
  MAX_TOKEN_LENGTH,
  parseToken,
  tokenMatchesHash,
} from "../../lib/tenancy/tokens.js";
import {
  authenticateToken,
  tenantIdOfToken,
  verifyAgentToken,
  verifyCallerToken,
} from "../../lib/tenancy/verify.js";

const NOW = new Date("2026-12-04T10:00:00.000Z");
const later = (ms: number) => new Date(NOW.getTime() + ms);

function tenantWith(kind: "agent" | "caller", id = "acme") {
  const token = generateToken(kind, id);
  const record = addToken(
    createTenantRecord({ id }, undefined, NOW),
    kind === "agent" ? "agent-token" : "caller-token",
    token,
    NOW,
  );
  return { token, record };
}

describe("token format", () => {
  it("names kind, tenant and a public id, and carries 256 random bits", () => {
    const { token, id, sha256 } = generateToken("agent", "acme-prod-1");
    expect(token).toMatch(/^kgw_agent_acme-prod-1_[0-9a-f]{16}_[0-9a-f]{64}$/);
    expect(parseToken(token)).toEqual({ kind: "agent", tenantId: "acme-prod-1", tokenId: id });
    expect(sha256).toBe(hashToken(token));
    expect(generateToken("agent", "acme-prod-1").token).not.toBe(token);
  });

  it("fits the longest tenant id within MAX_TOKEN_LENGTH", () => {
    const { token } = generateToken("caller", "a".repeat(63));
    expect(token.length).toBeLessThanOrEqual(MAX_TOKEN_LENGTH);
    expect(parseToken(token)?.tenantId).toBe("a".repeat(63));
  });

  const valid = generateToken("agent", "acme").token;
  it.each([
    ["not a string", 42],
    ["undefined", undefined],
    ["empty", ""],
    ["a megabyte", "kgw_agent_acme_".padEnd(1 << 20, "a")],
    ["another prefix", valid.replace(/^kgw_/, "kgx_")],
    ["an unknown kind", valid.replace("_agent_", "_admin_")],
    ["upper-case hex", valid.toUpperCase()],
    ["a trailing newline", `${valid}\n`],
    ["a leading space", ` ${valid}`],
    ["a short secret", valid.slice(0, -1)],
    ["an extra segment", valid.replace("_acme_", "_acme_x_")],
    ["the reserved tenant", valid.replace("_acme_", "_default_")],
    ["an invalid tenant id", valid.replace("_acme_", "_-acme_")],
    ["a look-alike letter", valid.replace("_acme_", "_асme_")],
  ])("refuses %s without throwing", (_what, text) => {
    expect(parseToken(text)).toBeUndefined();
  });

  it("compares hashes in constant time and never matches a malformed stored hash", () => {
    const { token, sha256 } = generateToken("agent", "acme");
    expect(tokenMatchesHash(token, sha256)).toBe(true);
    expect(tokenMatchesHash(`${token.slice(0, -1)}0`, sha256)).toBe(token.endsWith("0"));
    expect(tokenMatchesHash(token, sha256.slice(0, 62))).toBe(false);
    expect(tokenMatchesHash(token, "zz".repeat(32))).toBe(false);
    expect(tokenMatchesHash(token, "")).toBe(false);
  });
});

describe("verifying tokens", () => {
  const reasonOf = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return (err as { reason?: string; code?: string; message: string }).reason;
    }
    return "accepted";
  };

  it("accepts a tenant's own token and names the credential, never the secret", () => {
    const { token, record } = tenantWith("agent");
    expect(verifyAgentToken(record, token.token, NOW)).toEqual({
      tenantId: "acme",
      role: "agent",
      credential: "token",
      credentialId: token.id,
    });
    const caller = tenantWith("caller");
    expect(verifyCallerToken(caller.record, caller.token.token, NOW).role).toBe("caller");
  });

  it("finds the tenant from the token alone (one lookup, no scan)", () => {
    const { token, record } = tenantWith("agent");
    const asked: string[] = [];
    const lookup = (id: string) => {
      asked.push(id);
      return id === "acme" ? record : undefined;
    };
    expect(tenantIdOfToken(token.token)).toBe("acme");
    expect(authenticateToken(lookup, token.token, "agent", NOW).tenantId).toBe("acme");
    expect(asked).toEqual(["acme"]);
    expect(reasonOf(() => authenticateToken(lookup, "garbage", "agent", NOW))).toBe("malformed");
    expect(asked).toEqual(["acme"]);
  });

  it("refuses each way a token can be wrong, with a reason for logs and one message for peers", () => {
    const { token, record } = tenantWith("agent");
    const other = tenantWith("agent", "other");
    const sameIdOtherSecret = token.token.replace(/[0-9a-f]{64}$/, "0".repeat(64));
    const cases: [string, () => unknown][] = [
      ["malformed", () => verifyAgentToken(record, "Bearer x", NOW)],
      ["wrong-role", () => verifyCallerToken(record, token.token, NOW)],
      ["unknown-tenant", () => verifyAgentToken(undefined, token.token, NOW)],
      ["unknown-tenant", () => verifyAgentToken(other.record, token.token, NOW)],
      [
        "unknown-credential",
        () => verifyAgentToken(other.record, other.token.token.replace(other.token.id, "0".repeat(16)), NOW),
      ],
      ["mismatch", () => verifyAgentToken(record, sameIdOtherSecret, NOW)],
      ["revoked", () => verifyAgentToken(revokeCredential(record, token.id, NOW), token.token, NOW)],
      ["tenant-deleted", () => verifyAgentToken(deleteTenantRecord(record, NOW), token.token, NOW)],
    ];
    for (const [reason, fn] of cases) expect(reasonOf(fn), reason).toBe(reason);
    try {
      verifyAgentToken(record, sameIdOtherSecret, NOW);
    } catch (err) {
      expect(err).toMatchObject({
        code: "ERR_UNAUTHENTICATED",
        message: "invalid, expired or revoked credential",
      });
      expect(JSON.stringify(err)).not.toContain(sameIdOtherSecret.slice(-64));
    }
  });

  it("refuses a token past the end of its grace period", () => {
    const { token, record } = tenantWith("agent");
    const next = generateToken("agent", "acme");
    const rotated: TenantRecord = addToken(record, "agent-token", next, NOW, { rotateGraceMs: 60_000 });
    expect(verifyAgentToken(rotated, token.token, later(59_999)).credentialId).toBe(token.id);
    expect(reasonOf(() => verifyAgentToken(rotated, token.token, later(60_000)))).toBe("expired");
    expect(verifyAgentToken(rotated, next.token, later(60_000)).credentialId).toBe(next.id);
  });
});
