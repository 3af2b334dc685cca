/** Install tokens: issue, check, expiry, single use, revoke, the stored form, and the store race. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import {
  addInstallToken,
  checkInstallToken,
  installTokenStatus,
  issueInstallToken,
  MAX_INSTALL_TOKEN_TTL_MS,
  markInstallTokenUsed,
  redeemInstallToken,
} from "../../lib/tenancy/install/index.js";
import { MAX_CREDENTIALS_PER_KIND, MAX_RECORD_BYTES } from "../../lib/tenancy/limits.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import { updateTenant } from "../../lib/tenancy/mutate.js";
import {
  addAgentCertificate,
  addCallerCertificate,
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import { decodeTenantRecord, encodeTenantRecord } from "../../lib/tenancy/record-codec.js";
import type { TenantStore } from "../../lib/tenancy/store.js";
import { agentUri, callerUri } from "../../lib/tenancy/tenant-uri.js";
import { generateToken, parseToken } from "../../lib/tenancy/tokens.js";
import { authenticateToken, verifyAgentToken, verifyCallerToken } from "../../lib/tenancy/verify.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const HOUR = 3_600_000;
const at = (ms: number) => new Date(T0.getTime() + ms);
const SOURCE = { location: "tenants/acme.json", tenantId: "acme" };

function reasonOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as { reason?: string; code?: string }).reason ?? (err as { code: string }).code;
  }
  return "accepted";
}

function withInstall(options = { ttlMs: 24 * HOUR, singleUse: true }) {
  const token = generateToken("install", "acme");
  const record = addInstallToken(createTenantRecord({ id: "acme" }, undefined, T0), token, options, T0);
  return { token, record: { ...record, version: 1 } as TenantRecord };
}

describe("the install token's text", () => {
  it("names its kind, tenant and id, and parses as nothing else", () => {
    const { token, id } = generateToken("install", "acme");
    expect(token).toMatch(/^kgw_install_acme_[0-9a-f]{16}_[0-9a-f]{64}$/);
    expect(parseToken(token)).toEqual({ kind: "install", tenantId: "acme", tokenId: id });
    expect(generateToken("install", "a".repeat(63)).token.length).toBe(157);
  });

  it("is refused as an agent's or a caller's token before any lookup (wrong-role)", () => {
    const { token, record } = withInstall();
    const asked: string[] = [];
    const lookup = (id: string) => {
      asked.push(id);
      return record;
    };
    expect(reasonOf(() => verifyAgentToken(record, token.token, T0))).toBe("wrong-role");
    expect(reasonOf(() => verifyCallerToken(record, token.token, T0))).toBe("wrong-role");
    expect(reasonOf(() => authenticateToken(lookup, token.token, "agent", T0))).toBe("wrong-role");
    // And an agent token is no install token.
    const agent = generateToken("agent", "acme");
    const r = addToken(record, "agent-token", agent, T0);
    expect(reasonOf(() => checkInstallToken(r, agent.token, T0))).toBe("malformed");
  });
});

describe("checking an install token", () => {
  it("accepts the listed token until it expires", () => {
    const { token, record } = withInstall({ ttlMs: HOUR, singleUse: true });
    expect(checkInstallToken(record, token.token, at(HOUR - 1)).id).toBe(token.id);
    expect(reasonOf(() => checkInstallToken(record, token.token, at(HOUR)))).toBe("expired");
    expect(installTokenStatus(record.installTokens[0]!, at(HOUR))).toBe("expired");
  });

  it("refuses every way it can be wrong, with one reason for what may not exist", () => {
    const { token, record } = withInstall();
    const other = generateToken("install", "acme").token;
    expect(reasonOf(() => checkInstallToken(record, other, T0))).toBe("unknown");
    expect(reasonOf(() => checkInstallToken(record, `${token.token.slice(0, -1)}x`, T0))).toBe("malformed");
    const wrongSecret = `${token.token.slice(0, -64)}${"0".repeat(64)}`;
    expect(reasonOf(() => checkInstallToken(record, wrongSecret, T0))).toBe("unknown");
    expect(reasonOf(() => checkInstallToken(undefined, token.token, T0))).toBe("unknown");
    const globex = { ...record, id: "globex" };
    expect(reasonOf(() => checkInstallToken(globex, token.token, T0))).toBe("unknown");
    expect(reasonOf(() => checkInstallToken(deleteTenantRecord(record, T0), token.token, T0))).toBe(
      "unknown",
    );
    expect(reasonOf(() => checkInstallToken(record, "x".repeat(2000), T0))).toBe("malformed");
  });

  it("is spent by its first use when single-use, and not when reusable", () => {
    const single = withInstall();
    const used = markInstallTokenUsed(single.record, single.token.id, at(1));
    expect(reasonOf(() => checkInstallToken(used, single.token.token, at(2)))).toBe("used");
    expect(installTokenStatus(used.installTokens[0]!, at(2))).toBe("used");
    const reusable = withInstall({ ttlMs: HOUR, singleUse: false });
    const again = markInstallTokenUsed(reusable.record, reusable.token.id, at(1));
    expect(checkInstallToken(again, reusable.token.token, at(2)).usedAt).toBe(at(1).toISOString());
  });

  it("is revoked by id, like any credential, and then refused as unknown", () => {
    const { token, record } = withInstall();
    const revoked = revokeCredential(record, token.id, at(1));
    expect(installTokenStatus(revoked.installTokens[0]!, at(1))).toBe("revoked");
    expect(reasonOf(() => checkInstallToken(revoked, token.token, at(1)))).toBe("revoked");
    expect(reasonOf(() => revokeCredential(revoked, token.id, at(2)))).toBe("ERR_ALREADY_REVOKED");
  });
});

describe("issuing install tokens", () => {
  it("bounds the lifetime: at most 30 days, at least a second", () => {
    const r = createTenantRecord({ id: "acme" }, undefined, T0);
    const token = generateToken("install", "acme");
    const add = (ttlMs: number) => () => addInstallToken(r, token, { ttlMs, singleUse: true }, T0);
    expect(reasonOf(add(MAX_INSTALL_TOKEN_TTL_MS + 1))).toBe("ERR_BAD_REQUEST");
    expect(reasonOf(add(999))).toBe("ERR_BAD_REQUEST");
    expect(add(MAX_INSTALL_TOKEN_TTL_MS)().installTokens[0]!.expiresAt).toBe(
      at(MAX_INSTALL_TOKEN_TTL_MS).toISOString(),
    );
  });

  it(`keeps at most ${MAX_CREDENTIALS_PER_KIND}, forgetting spent ones first`, () => {
    let r = createTenantRecord({ id: "acme" }, undefined, T0);
    const ids: string[] = [];
    for (let i = 0; i < MAX_CREDENTIALS_PER_KIND; i++) {
      const t = generateToken("install", "acme");
      ids.push(t.id);
      r = addInstallToken(r, t, { ttlMs: HOUR, singleUse: true }, T0);
    }
    expect(
      reasonOf(() =>
        addInstallToken(r, generateToken("install", "acme"), { ttlMs: HOUR, singleUse: true }, T0),
      ),
    ).toBe("ERR_BAD_REQUEST");
    r = markInstallTokenUsed(r, ids[3]!, at(1));
    r = addInstallToken(r, generateToken("install", "acme"), { ttlMs: HOUR, singleUse: true }, at(2));
    expect(r.installTokens).toHaveLength(MAX_CREDENTIALS_PER_KIND);
    expect(r.installTokens.map((t) => t.id)).not.toContain(ids[3]);
  });
});

describe("the stored form", () => {
  it("round-trips install tokens, and leaves the list out (and reads it as empty) when there are none", () => {
    const { record } = withInstall();
    const text = encodeTenantRecord(record);
    expect(decodeTenantRecord(text, SOURCE)).toEqual(record);
    const none = { ...record, installTokens: [] };
    const plain = encodeTenantRecord(none);
    expect(JSON.parse(plain)).not.toHaveProperty("installTokens");
    expect(decodeTenantRecord(plain, SOURCE).installTokens).toEqual([]);
  });

  it("refuses install tokens that do not expire, lack a field, or reuse another credential's id", () => {
    const { record } = withInstall();
    const [t] = record.installTokens;
    const bad = (installTokens: unknown[]) =>
      reasonOf(() => decodeTenantRecord(JSON.stringify({ schema: 1, ...record, installTokens }), SOURCE));
    expect(bad([{ ...t, expiresAt: null }])).toBe("ERR_STORE_CORRUPT");
    expect(bad([{ ...t, singleUse: "yes" }])).toBe("ERR_STORE_CORRUPT");
    const { usedAt: _u, ...noUsedAt } = t!;
    expect(bad([noUsedAt])).toBe("ERR_STORE_CORRUPT");
    expect(bad([{ ...t, extra: 1 }])).toBe("ERR_STORE_CORRUPT");
    const agent = generateToken("agent", "acme");
    const r = addToken(record, "agent-token", agent, T0);
    expect(
      reasonOf(() =>
        decodeTenantRecord(
          JSON.stringify({ schema: 1, ...r, installTokens: [{ ...t, id: agent.id }] }),
          SOURCE,
        ),
      ),
    ).toBe("ERR_STORE_CORRUPT");
  });

  it(`still fits ${MAX_CREDENTIALS_PER_KIND} credentials of every kind and as many install tokens in ${MAX_RECORD_BYTES} bytes`, () => {
    const id = `t${"x".repeat(61)}z`;
    const certificate = (i: number, role: "agent" | "caller") => ({
      serial: `${role === "agent" ? "3" : "2"}${i.toString(16).padStart(31, "f")}`,
      subject: `CN=${id}, O=kgw:tenant-${role}`,
      uri: role === "agent" ? agentUri(id) : callerUri(id),
      notAfter: T0,
    });
    let r = createTenantRecord({ id, displayName: "D".repeat(128) }, undefined, T0);
    for (let i = 0; i < MAX_CREDENTIALS_PER_KIND; i++) {
      r = addToken(r, "agent-token", generateToken("agent", id), T0);
      r = addToken(r, "caller-token", generateToken("caller", id), T0);
      r = addAgentCertificate(r, certificate(i, "agent"), T0);
      r = addCallerCertificate(r, certificate(i, "caller"), T0);
      r = addInstallToken(r, generateToken("install", id), { ttlMs: HOUR, singleUse: true }, T0);
      r = revokeCredential(r, r.installTokens.at(-1)!.id, T0);
    }
    expect(Buffer.byteLength(encodeTenantRecord({ ...r, version: 1 }))).toBeLessThan(MAX_RECORD_BYTES);
  });
});

describe("spending an install token in the store", () => {
  let dir: string | undefined;
  let store: TenantStore | undefined;
  afterEach(async () => {
    await store?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  async function openStore(): Promise<TenantStore> {
    dir = await mkdtemp(path.join(tmpdir(), "kgw-install-"));
    store = await openFileTenantStore(path.join(dir, "store"), { create: true });
    await updateTenant(store, "acme", (current) => createTenantRecord({ id: "acme" }, current, T0));
    return store;
  }

  it("lists a fresh agent token and marks the install token used, in one write", async () => {
    const s = await openStore();
    const issued = await issueInstallToken(s, "acme", { ttlMs: HOUR, singleUse: true }, () => T0);
    const redeemed = await redeemInstallToken(s, issued.token, () => at(1));
    expect(redeemed.record.version).toBe(issued.record.version + 1);
    expect(verifyAgentToken(redeemed.record, redeemed.agentToken, at(2)).tenantId).toBe("acme");
    expect(redeemed.record.installTokens[0]!.usedAt).toBe(at(1).toISOString());
    await expect(redeemInstallToken(s, issued.token, () => at(2))).rejects.toMatchObject({ reason: "used" });
  });

  it("lets exactly one of two concurrent fetches of a single-use token win", async () => {
    const s = await openStore();
    const issued = await issueInstallToken(s, "acme", { ttlMs: HOUR, singleUse: true }, () => T0);
    const results = await Promise.allSettled([
      redeemInstallToken(s, issued.token, () => at(1)),
      redeemInstallToken(s, issued.token, () => at(1)),
    ]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const lost = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(lost.reason).toMatchObject({ reason: "used" });
    const record = (await s.get("acme"))!;
    expect(record.agentTokens).toHaveLength(1);
  });

  it("touches no store for text that is not an install token, and writes nothing on a refusal", async () => {
    const s = await openStore();
    const before = (await s.get("acme"))!.version;
    await expect(redeemInstallToken(s, "kgw_agent_acme_x", () => T0)).rejects.toMatchObject({
      reason: "malformed",
    });
    const unknown = generateToken("install", "acme").token;
    await expect(redeemInstallToken(s, unknown, () => T0)).rejects.toMatchObject({ reason: "unknown" });
    const nobody = generateToken("install", "nobody").token;
    await expect(redeemInstallToken(s, nobody, () => T0)).rejects.toMatchObject({ reason: "unknown" });
    expect((await s.get("acme"))!.version).toBe(before);
  });
});
