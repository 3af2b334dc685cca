/**
 * The FleetRegistry contract, written once. MemoryRegistry (registry-memory.test.ts) and
 * DynamoRegistry on dynalite (registry-dynamo.test.ts) both run it, so the tests' registry and
 * the hosted table agree on every condition: lease takeover, claim order, fenced releases,
 * several instances holding one agent, sweeping.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { FleetRegistry } from "../../lib/registry/fleet-registry.js";
import { sweepOwnerRows } from "../../lib/registry/fleet-registry.js";
import { isLeaseLive, liveOwners, sweepable } from "../../lib/registry/liveness.js";
import type { InstanceLease, OwnerRow } from "../../lib/registry/model.js";

export type CorruptItemKind = "lease" | "owner";

export interface RegistryFixture {
  /** A client of the shared storage (another instance, or this one after a restart). */
  open(): Promise<FleetRegistry>;
  /** Writes a malformed item of the kind given, next to good ones; absent where impossible. */
  corrupt?(kind: CorruptItemKind, tenant: string): Promise<void>;
  cleanup(): Promise<void>;
}

export const T0 = Date.parse("2026-12-04T10:00:00.000Z");
const LEASE = 10_000;

export function lease(instanceId: string, over: Partial<InstanceLease> = {}): InstanceLease {
  const heartbeatAt = over.heartbeatAt ?? T0;
  return {
    instanceId,
    peerAddress: `${instanceId}.fleet.internal:8135`,
    incarnation: 1,
    heartbeatAt,
    expiresAt: heartbeatAt + LEASE,
    draining: false,
    agents: 0,
    ...over,
  };
}

export function row(
  tenant: string,
  agentId: string,
  instanceId: string,
  over: Partial<OwnerRow> = {},
): OwnerRow {
  return { tenant, agentId, instanceId, incarnation: 1, session: 1, connectedAt: T0, ...over };
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

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, timeoutMs = 5_000): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sessions = (rows: readonly OwnerRow[]) =>
  rows.map((r) => `${r.instanceId}/${r.agentId}@${r.incarnation}.${r.session}`);

export function describeRegistryContract(
  name: string,
  makeFixture: () => Promise<RegistryFixture>,
  /** Whether the storage can hold malformed items (fixture.corrupt); memory cannot. */
  options: { corruptible: boolean },
): void {
  describe(`FleetRegistry contract: ${name}`, () => {
    let fixture: RegistryFixture;
    let registry: FleetRegistry;
    const opened: FleetRegistry[] = [];
    const open = async () => {
      const r = await fixture.open();
      opened.push(r);
      return r;
    };

    beforeEach(async () => {
      fixture = await makeFixture();
      registry = await open();
    });
    afterEach(async () => {
      for (const r of opened.splice(0)) await r.close();
      await fixture.cleanup();
    });

    describe("leases", () => {
      it("lists a heartbeat's lease, live until it expires by the reader's clock", async () => {
        await registry.heartbeat(lease("i1", { agents: 3 }));
        const other = await open();
        const { items, unreadable } = await other.listInstances();
        expect(unreadable).toEqual([]);
        expect(items).toEqual([lease("i1", { agents: 3 })]);
        expect(isLeaseLive(items[0]!, T0 + LEASE - 1)).toBe(true);
        expect(isLeaseLive(items[0]!, T0 + LEASE)).toBe(false);
      });

      it("renews a lease with each heartbeat of the same incarnation", async () => {
        await registry.heartbeat(lease("i1"));
        await registry.heartbeat(lease("i1", { heartbeatAt: T0 + 3_000 }));
        const [l] = (await registry.listInstances()).items;
        expect(l).toMatchObject({ heartbeatAt: T0 + 3_000, expiresAt: T0 + 3_000 + LEASE });
        expect(isLeaseLive(l!, T0 + LEASE + 1)).toBe(true);
      });

      it("counts a draining instance as gone while its lease runs", async () => {
        await registry.heartbeat(lease("i1", { draining: true }));
        const [l] = (await registry.listInstances()).items;
        expect(l!.draining).toBe(true);
        expect(isLeaseLive(l!, T0)).toBe(false);
        // Draining is not dead: its rows are not swept while it heartbeats.
        expect(sweepable([l!], T0 + 1, 0)).toEqual([]);
      });

      it("lets a newer incarnation take the lease over and refuses the older one from then on", async () => {
        await registry.heartbeat(lease("i1", { incarnation: 100 }));
        await registry.heartbeat(lease("i1", { incarnation: 200, peerAddress: "new.fleet.internal:8135" }));
        const err = await expectCode(registry.heartbeat(lease("i1", { incarnation: 100 })), "ERR_CONFLICT");
        expect(err.name).toBe("LeaseLostError");
        // The older one cannot end the newer one's lease either.
        await registry.releaseLease("i1", 100, T0);
        const [l] = (await registry.listInstances()).items;
        expect(l).toMatchObject({
          incarnation: 200,
          peerAddress: "new.fleet.internal:8135",
          draining: false,
        });
      });

      it("ends a released lease at once, and removes it only if nobody renewed it since", async () => {
        await registry.heartbeat(lease("i1"));
        await registry.releaseLease("i1", 1, T0 + 500);
        const [released] = (await registry.listInstances()).items;
        expect(released).toMatchObject({ expiresAt: T0 + 500, draining: true });
        expect(isLeaseLive(released!, T0 + 501)).toBe(false);

        await registry.heartbeat(lease("i1", { heartbeatAt: T0 + 1_000 }));
        expect(await registry.removeLease(released!)).toBe(false);
        expect((await registry.listInstances()).items).toHaveLength(1);
        const [renewed] = (await registry.listInstances()).items;
        expect(await registry.removeLease(renewed!)).toBe(true);
        expect((await registry.listInstances()).items).toEqual([]);
      });

      it("refuses ids that could forge a key before touching storage", async () => {
        await expectCode(registry.heartbeat(lease("i1#x")), "ERR_BAD_REQUEST");
        await expectCode(registry.claim(row("Acme", "a", "i1")), "ERR_BAD_REQUEST");
        await expectCode(registry.claim(row("acme", "a", "i1#x")), "ERR_BAD_REQUEST");
        await expectCode(registry.claim(row("acme", "a\n", "i1")), "ERR_BAD_REQUEST");
        await expectCode(registry.ownersOf("owners#x"), "ERR_BAD_REQUEST");
        await expectCode(registry.claim(row("acme", "a", "i1", { session: -1 })), "ERR_BAD_REQUEST");
        expect((await registry.listInstances()).items).toEqual([]);
      });
    });

    describe("ownership", () => {
      it("lists a tenant's rows from every instance, and only that tenant's", async () => {
        await registry.claim(row("acme", "a1", "i1"));
        await registry.claim(row("acme", "a2", "i2"));
        await registry.claim(row("other", "a1", "i1"));
        const other = await open();
        const { items, unreadable } = await other.ownersOf("acme");
        expect(unreadable).toEqual([]);
        expect(sessions(items).sort()).toEqual(["i1/a1@1.1", "i2/a2@1.1"]);
        expect(items.find((r) => r.agentId === "a1")).toEqual(row("acme", "a1", "i1"));
        expect(await other.ownersOf("nobody")).toEqual({ items: [], unreadable: [] });
      });

      it("keeps the newer session when two sessions race, whichever lands first", async () => {
        // Newer first: the older one's late claim is refused.
        expect(await registry.claim(row("acme", "a", "i1", { session: 5 }))).toBe("claimed");
        expect(await registry.claim(row("acme", "a", "i1", { session: 4 }))).toBe("superseded");
        expect(sessions((await registry.ownersOf("acme")).items)).toEqual(["i1/a@1.5"]);
        // Older first: the newer one replaces it.
        expect(await registry.claim(row("beta", "a", "i1", { session: 4 }))).toBe("claimed");
        expect(await registry.claim(row("beta", "a", "i1", { session: 5 }))).toBe("claimed");
        expect(sessions((await registry.ownersOf("beta")).items)).toEqual(["i1/a@1.5"]);
        // Both at once, from two clients.
        const other = await open();
        await Promise.all([
          registry.claim(row("gamma", "a", "i1", { session: 8 })),
          other.claim(row("gamma", "a", "i1", { session: 7 })),
        ]);
        expect(sessions((await registry.ownersOf("gamma")).items)).toEqual(["i1/a@1.8"]);
      });

      it("treats a repeated claim of the same session as done (a retried write)", async () => {
        expect(await registry.claim(row("acme", "a", "i1", { session: 3 }))).toBe("claimed");
        expect(await registry.claim(row("acme", "a", "i1", { session: 3 }))).toBe("claimed");
        expect((await registry.ownersOf("acme")).items).toHaveLength(1);
      });

      it("lets a restarted instance's row replace its predecessor's, never the other way", async () => {
        await registry.claim(row("acme", "a", "i1", { incarnation: 100, session: 50 }));
        expect(await registry.claim(row("acme", "a", "i1", { incarnation: 200, session: 1 }))).toBe(
          "claimed",
        );
        expect(await registry.claim(row("acme", "a", "i1", { incarnation: 100, session: 51 }))).toBe(
          "superseded",
        );
        expect(sessions((await registry.ownersOf("acme")).items)).toEqual(["i1/a@200.1"]);
      });

      it("fences a late release from an older session or incarnation: the newer owner stays", async () => {
        await registry.claim(row("acme", "a", "i1", { incarnation: 100, session: 1 }));
        await registry.claim(row("acme", "a", "i1", { incarnation: 100, session: 2 }));
        expect(await registry.release(row("acme", "a", "i1", { incarnation: 100, session: 1 }))).toBe(
          "fenced",
        );
        await registry.claim(row("acme", "a", "i1", { incarnation: 200, session: 1 }));
        expect(await registry.release(row("acme", "a", "i1", { incarnation: 100, session: 2 }))).toBe(
          "fenced",
        );
        expect(sessions((await registry.ownersOf("acme")).items)).toEqual(["i1/a@200.1"]);
        expect(await registry.release(row("acme", "a", "i1", { incarnation: 200, session: 1 }))).toBe(
          "released",
        );
        expect((await registry.ownersOf("acme")).items).toEqual([]);
        // Releasing what is not there is fenced too, not an error.
        expect(await registry.release(row("acme", "a", "i1", { incarnation: 200, session: 1 }))).toBe(
          "fenced",
        );
      });

      it("keeps both rows of an agent that holds streams to two instances", async () => {
        await registry.claim(row("acme", "a", "i1"));
        await registry.claim(row("acme", "a", "i2", { session: 9 }));
        expect(sessions((await registry.ownersOf("acme")).items).sort()).toEqual(["i1/a@1.1", "i2/a@1.9"]);
        await registry.release(row("acme", "a", "i1"));
        expect(sessions((await registry.ownersOf("acme")).items)).toEqual(["i2/a@1.9"]);
      });

      it("keeps agent ids apart that a separator could confuse", async () => {
        for (const agentId of ["x#y", "x%23y", "x", "x%y"]) await registry.claim(row("acme", agentId, "i1"));
        const ids = (await registry.ownersOf("acme")).items.map((r) => r.agentId).sort();
        expect(ids).toEqual(["x", "x#y", "x%23y", "x%y"]);
        expect(await registry.release(row("acme", "x#y", "i1"))).toBe("released");
        expect((await registry.ownersOf("acme")).items.map((r) => r.agentId).sort()).toEqual([
          "x",
          "x%23y",
          "x%y",
        ]);
      });

      it("finds an instance's rows across tenants, and sweeps only its older incarnations'", async () => {
        await registry.claim(row("acme", "a", "i1", { incarnation: 100 }));
        await registry.claim(row("beta", "b", "i1", { incarnation: 100 }));
        await registry.claim(row("beta", "c", "i1", { incarnation: 300 }));
        await registry.claim(row("beta", "b", "i2", { incarnation: 100 }));
        const mine = await until(
          () => registry.rowsOfInstance("i1"),
          (l) => l.items.length === 3,
        );
        expect(sessions(mine.items).sort()).toEqual(["i1/a@100.1", "i1/b@100.1", "i1/c@300.1"]);
        const swept = await sweepOwnerRows(registry, "i1", 300);
        expect(swept.removed).toBe(2);
        expect(sessions((await registry.ownersOf("beta")).items).sort()).toEqual([
          "i1/c@300.1",
          "i2/b@100.1",
        ]);
        expect((await registry.ownersOf("acme")).items).toEqual([]);
      });

      it("shows readers only rows of live instances of the same or a newer incarnation", async () => {
        await registry.heartbeat(lease("live", { incarnation: 5 }));
        await registry.heartbeat(lease("draining", { draining: true }));
        await registry.heartbeat(lease("expired", { heartbeatAt: T0 - LEASE }));
        for (const [agent, instance, inc] of [
          ["a", "live", 5],
          ["b", "live", 4],
          ["c", "live", 6],
          ["d", "draining", 1],
          ["e", "expired", 1],
          ["f", "unknown", 1],
        ] as const) {
          await registry.claim(row("acme", agent, instance, { incarnation: inc }));
        }
        const rows = (await registry.ownersOf("acme")).items;
        const instances = (await registry.listInstances()).items;
        expect(
          liveOwners(rows, instances, T0)
            .map((r) => r.agentId)
            .sort(),
        ).toEqual(["a", "c"]);
        expect(liveOwners(rows, instances, T0 + LEASE)).toEqual([]);
      });
    });

    if (options.corruptible) {
      describe("bad items", () => {
        it("skips and reports a malformed lease or ownership row, and lists the good ones", async () => {
          await registry.heartbeat(lease("good"));
          await registry.claim(row("acme", "good", "good"));
          await fixture.corrupt!("lease", "acme");
          await fixture.corrupt!("owner", "acme");
          const instances = await registry.listInstances();
          expect(instances.items.map((l) => l.instanceId)).toEqual(["good"]);
          expect(instances.unreadable.map((e) => (e as { code?: string }).code)).toEqual([
            "ERR_STORE_CORRUPT",
          ]);
          const owners = await registry.ownersOf("acme");
          expect(owners.items.map((r) => r.agentId)).toEqual(["good"]);
          expect(owners.unreadable).toHaveLength(1);
          expect(owners.unreadable[0]!.message).toMatch(/^fleet registry: item owners#acme\//);
        });
      });
    }
  });
}
