/**
 * The TenantStore contract, written once. Every implementation runs it through its own fixture
 * (tenant-store-file.test.ts now; the DynamoDB store of the fleet issue next), so all stores
 * agree on conditional writes, snapshots, credential rules, corrupt data and change visibility.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { MAX_CREDENTIALS_PER_KIND, MAX_RECORD_BYTES } from "../../lib/tenancy/limits.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import { updateTenant } from "../../lib/tenancy/mutate.js";
import {
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  requireActive,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import type { TenantStore, TenantWatch } from "../../lib/tenancy/store.js";
import { generateToken } from "../../lib/tenancy/tokens.js";
import { authenticateToken } from "../../lib/tenancy/verify.js";

export type CorruptionKind = "garbage" | "not-a-record" | "oversized" | "wrong-id" | "unknown-field";

export interface TenantStoreFixture {
  /** Another client of the same storage: a second process, or the same one after a restart. */
  open(): Promise<TenantStore>;
  /** Replaces the stored form of `id` with bad data of the given kind. */
  corrupt(id: string, how: CorruptionKind): Promise<void>;
  cleanup(): Promise<void>;
}

const HOUR = 3_600_000;
const T0 = new Date("2026-12-04T10:00:00.000Z");
const at = (ms: number) => new Date(T0.getTime() + ms);

/** Creates a tenant with one agent token through the public path (updateTenant). */
export async function createTenant(store: TenantStore, id: string, now = T0) {
  const agent = generateToken("agent", id);
  const record = await updateTenant(store, id, (current) =>
    addToken(createTenantRecord({ id }, current, now), "agent-token", agent, now),
  );
  return { record, agentToken: agent.token, agentTokenId: agent.id };
}

async function addAgentToken(store: TenantStore, id: string, now: Date, rotateGraceMs?: number) {
  const token = generateToken("agent", id);
  const record = await updateTenant(store, id, (current) =>
    addToken(requireActive(current, id), "agent-token", token, now, { rotateGraceMs }),
  );
  return { record, token: token.token, tokenId: token.id };
}

async function expectCode(promise: Promise<unknown>, code: string): Promise<Error> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, `expected a failure with ${code}`).toBeInstanceOf(Error);
  expect((err as { code?: string }).code).toBe(code);
  return err as Error;
}

async function until(condition: () => boolean, timeoutMs: number): Promise<number> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - start;
}

export function describeTenantStoreContract(
  name: string,
  makeFixture: () => Promise<TenantStoreFixture>,
): void {
  describe(`TenantStore contract: ${name}`, () => {
    let fixture: TenantStoreFixture;
    let store: TenantStore;
    const opened: TenantStore[] = [];
    const watches: TenantWatch[] = [];
    const open = async () => {
      const s = await fixture.open();
      opened.push(s);
      return s;
    };

    beforeEach(async () => {
      fixture = await makeFixture();
      store = await open();
    });
    afterEach(async () => {
      for (const w of watches.splice(0)) w.close();
      for (const s of opened.splice(0)) await s.close();
      await fixture.cleanup();
    });

    describe("records", () => {
      it("stores a created tenant as version 1 and returns frozen snapshots", async () => {
        await createTenant(store, "acme");
        const got = await store.get("acme");
        expect(got).toMatchObject({ id: "acme", version: 1, state: "active", displayName: "acme" });
        expect(got!.agentTokens).toHaveLength(1);
        expect(Object.isFrozen(got)).toBe(true);
        expect(Object.isFrozen(got!.agentTokens[0])).toBe(true);
        expect(() => {
          (got as { displayName: string }).displayName = "changed";
        }).toThrow(TypeError);
        expect((await store.get("acme"))!.displayName).toBe("acme");
      });

      it("answers undefined for an id never written", async () => {
        expect(await store.get("nobody")).toBeUndefined();
      });

      it.each([
        ["a path", "../../etc/passwd"],
        ["upper case", "Acme"],
        ["an underscore", "a_b"],
        ["empty", ""],
        ["64 characters", "a".repeat(64)],
        ["a leading hyphen", "-acme"],
        ["a newline", "acme\n"],
        ["full-width letters", "ａｃｍｅ"],
        ["the reserved default", "default"],
      ])("refuses an id with %s before touching storage", async (_what, id) => {
        await expectCode(store.get(id), "ERR_BAD_REQUEST");
      });

      it("lists every tenant ordered by id, tombstones included", async () => {
        for (const id of ["zeta", "alpha", "mid"]) await createTenant(store, id);
        await updateTenant(store, "mid", (c) => deleteTenantRecord(requireActive(c, "mid"), T0));
        const { tenants, unreadable } = await store.list();
        expect(tenants.map((t) => [t.id, t.state])).toEqual([
          ["alpha", "active"],
          ["mid", "deleted"],
          ["zeta", "active"],
        ]);
        expect(unreadable).toEqual([]);
      });

      it("keeps what was written across a restart (a new client of the same storage)", async () => {
        const { agentToken } = await createTenant(store, "acme");
        await store.close();
        const again = await open();
        const record = await again.get("acme");
        expect(record?.version).toBe(1);
        expect(authenticateToken(() => record, agentToken, "agent", T0).tenantId).toBe("acme");
      });
    });

    describe("conditional writes", () => {
      it("refuses to create a tenant that exists (ERR_ALREADY_EXISTS)", async () => {
        await createTenant(store, "acme");
        await expectCode(createTenant(store, "acme"), "ERR_ALREADY_EXISTS");
        expect((await store.get("acme"))!.version).toBe(1);
      });

      it("refuses a write based on a stale version (ERR_CONFLICT) and keeps the winner", async () => {
        const { record } = await createTenant(store, "acme");
        const a = { ...record, version: 2, displayName: "first" };
        const b = { ...record, version: 2, displayName: "second" };
        await store.put(a);
        await expectCode(store.put(b), "ERR_CONFLICT");
        expect((await store.get("acme"))!.displayName).toBe("first");
      });

      it("refuses version 1 over an existing record, and a write that skips a version", async () => {
        const { record } = await createTenant(store, "acme");
        await expectCode(store.put({ ...record, version: 1, displayName: "again" }), "ERR_CONFLICT");
        await expectCode(store.put({ ...record, version: 3 }), "ERR_CONFLICT");
        expect(await store.get("acme")).toMatchObject({ version: 1, displayName: "acme" });
      });

      it("refuses a write to an id that has no record unless it is version 1", async () => {
        const { record } = await createTenant(store, "acme");
        await expectCode(store.put({ ...record, id: "other", version: 2 }), "ERR_CONFLICT");
        expect(await store.get("other")).toBeUndefined();
      });

      it("loses no update when two clients write concurrently", async () => {
        await createTenant(store, "acme");
        const second = await open();
        const writers = [store, second].flatMap((client) =>
          Array.from({ length: 6 }, async () => {
            const token = generateToken("caller", "acme");
            await updateTenant(
              client,
              "acme",
              (c) => addToken(requireActive(c, "acme"), "caller-token", token, T0),
              // Twelve writers on one record: enough attempts that none gives up; the point is
              // that every write that reports success is in the final record.
              { maxAttempts: 100 },
            );
            return token.id;
          }),
        );
        const ids = await Promise.all(writers);
        const final = (await store.get("acme"))!;
        expect(final.version).toBe(1 + ids.length);
        expect(final.callerTokens.map((t) => t.id).sort()).toEqual([...ids].sort());
      });
    });

    describe("credentials", () => {
      it("authenticates an agent token by the tenant it names, and refuses it in the wrong role", async () => {
        const { agentToken } = await createTenant(store, "acme");
        await createTenant(store, "other");
        const snapshot = new Map((await store.list()).tenants.map((t) => [t.id, t]));
        const lookup = (id: string) => snapshot.get(id);
        expect(authenticateToken(lookup, agentToken, "agent", T0)).toMatchObject({
          tenantId: "acme",
          role: "agent",
        });
        expect(() => authenticateToken(lookup, agentToken, "caller", T0)).toThrow(
          expect.objectContaining({ code: "ERR_UNAUTHENTICATED", reason: "wrong-role" }),
        );
        // The same secret presented under another tenant's name.
        const forged = agentToken.replace("_acme_", "_other_");
        expect(() => authenticateToken(lookup, forged, "agent", T0)).toThrow(
          expect.objectContaining({ reason: "unknown-credential" }),
        );
      });

      it("keeps a rotated-out token valid for the grace period, then refuses it", async () => {
        const first = await createTenant(store, "acme");
        const second = await addAgentToken(store, "acme", at(HOUR), 24 * HOUR);
        const record = () => store.get("acme");
        const check = async (token: string, when: Date) => {
          const r = await record();
          return () => authenticateToken(() => r, token, "agent", when);
        };
        expect((await check(first.agentToken, at(HOUR + 1)))().credentialId).toBe(first.agentTokenId);
        expect((await check(first.agentToken, at(25 * HOUR - 1)))().tenantId).toBe("acme");
        expect(await check(first.agentToken, at(25 * HOUR))).toThrow(
          expect.objectContaining({ reason: "expired" }),
        );
        expect((await check(second.token, at(1000 * HOUR)))().credentialId).toBe(second.tokenId);
      });

      it("refuses a revoked token at once, grace or not", async () => {
        const first = await createTenant(store, "acme");
        await addAgentToken(store, "acme", at(HOUR), 24 * HOUR);
        await updateTenant(store, "acme", (c) =>
          revokeCredential(requireActive(c, "acme"), first.agentTokenId, at(2 * HOUR)),
        );
        const r = await store.get("acme");
        expect(() => authenticateToken(() => r, first.agentToken, "agent", at(2 * HOUR))).toThrow(
          expect.objectContaining({ reason: "revoked" }),
        );
      });

      it("refuses every credential of a deleted tenant; a re-created tenant continues the versions", async () => {
        const old = await createTenant(store, "acme");
        await updateTenant(store, "acme", (c) => deleteTenantRecord(requireActive(c, "acme"), T0));
        const tombstone = await store.get("acme");
        expect(tombstone).toMatchObject({ state: "deleted", version: 2, agentTokens: [] });
        expect(() => authenticateToken(() => tombstone, old.agentToken, "agent", T0)).toThrow(
          expect.objectContaining({ reason: "tenant-deleted" }),
        );
        const reborn = await createTenant(store, "acme");
        expect(reborn.record.version).toBe(3);
        const r = await store.get("acme");
        expect(() => authenticateToken(() => r, old.agentToken, "agent", T0)).toThrow(
          expect.objectContaining({ reason: "unknown-credential" }),
        );
        expect(authenticateToken(() => r, reborn.agentToken, "agent", T0).tenantId).toBe("acme");
      });
    });

    describe("bad data", () => {
      it.each<CorruptionKind>(["garbage", "not-a-record", "oversized", "wrong-id", "unknown-field"])(
        "reports a %s record as ERR_STORE_CORRUPT naming it, and still lists the others",
        async (how) => {
          await createTenant(store, "good");
          await createTenant(store, "bad");
          await fixture.corrupt("bad", how);
          const err = await expectCode(store.get("bad"), "ERR_STORE_CORRUPT");
          expect(err.message).toContain("bad");
          expect(err.message.length).toBeLessThan(400);
          const { tenants, unreadable } = await store.list();
          expect(tenants.map((t) => t.id)).toEqual(["good"]);
          expect(unreadable.map((e) => [e.code, e.tenantId])).toEqual([["ERR_STORE_CORRUPT", "bad"]]);
        },
      );

      it("does not overwrite a corrupt record (its version is unknown)", async () => {
        const { record } = await createTenant(store, "bad");
        await fixture.corrupt("bad", "garbage");
        await expectCode(store.put({ ...record, version: 2 }), "ERR_STORE_CORRUPT");
        await expectCode(createTenant(store, "bad"), "ERR_STORE_CORRUPT");
      });

      it("refuses an oversized or hostile record on write (ERR_BAD_REQUEST) and stores nothing", async () => {
        const { record } = await createTenant(store, "acme");
        const tooLong = { ...record, version: 2, displayName: "x".repeat(MAX_RECORD_BYTES) };
        await expectCode(store.put(tooLong), "ERR_BAD_REQUEST");
        await expectCode(
          store.put({ ...record, version: 2, displayName: "\u001b[31mred" }),
          "ERR_BAD_REQUEST",
        );
        const tokens = Array.from({ length: MAX_CREDENTIALS_PER_KIND + 1 }, () => {
          const t = generateToken("agent", "acme");
          return {
            id: t.id,
            sha256: t.sha256,
            createdAt: T0.toISOString(),
            expiresAt: null,
            revokedAt: null,
          };
        });
        await expectCode(store.put({ ...record, version: 2, agentTokens: tokens }), "ERR_BAD_REQUEST");
        const sneaky = { ...record, version: 2, extra: "field" } as TenantRecord;
        await expectCode(store.put(sneaky), "ERR_BAD_REQUEST");
        expect((await store.get("acme"))!.version).toBe(1);
      });
    });

    describe("watch", () => {
      it("sees creation, change and deletion within its interval, newest version only", async () => {
        const writer = await open();
        const watch = store.watch({ intervalMs: 50 });
        watches.push(watch);
        const events: string[] = [];
        watch.on("change", (c) => events.push(...c.changed.map((r) => `${r.id}@${r.version}:${r.state}`)));
        await watch.ready;
        expect(watch.get("acme")).toBeUndefined();

        await createTenant(writer, "acme");
        const seenAfter = await until(() => watch.get("acme") !== undefined, 5_000);
        expect(seenAfter).toBeLessThan(2_000);
        await addAgentToken(writer, "acme", T0, 0);
        await until(() => watch.get("acme")?.version === 2, 5_000);
        await updateTenant(writer, "acme", (c) => deleteTenantRecord(requireActive(c, "acme"), T0));
        await until(() => watch.get("acme")?.state === "deleted", 5_000);
        expect(events).toEqual(["acme@1:active", "acme@2:active", "acme@3:deleted"]);
      });

      it("keeps the last good record of a tenant whose stored form turns corrupt, and reports it", async () => {
        await createTenant(store, "acme");
        const watch = store.watch({ intervalMs: 50 });
        watches.push(watch);
        const errors: Error[] = [];
        watch.on("error", (e) => errors.push(e));
        await watch.ready;
        await fixture.corrupt("acme", "garbage");
        await until(() => errors.length > 0, 5_000);
        expect(errors[0]).toMatchObject({ code: "ERR_STORE_CORRUPT" });
        expect(watch.get("acme")?.version).toBe(1);
      });
    });
  });
}
