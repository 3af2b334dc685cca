/**
 * The DynamoDB registry on dynalite: the shared contract, then what only a remote table does —
 * it can be stopped, black-holed and throttled, and it can hold malformed items. The keepers
 * ride out an outage of the real client and catch up when the table returns.
 */
import { type AttributeValue, PutItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DynamoRegistry } from "../../lib/registry/dynamo/dynamo-registry.js";
import { LeaseKeeper } from "../../lib/registry/lease-keeper.js";
import { OwnershipWriter } from "../../lib/registry/ownership-writer.js";
import { Sweeper } from "../../lib/registry/sweeper.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import { describeRegistryContract, lease, row, T0 } from "./registry.contract.js";

let dynamo: LocalDynamo;
let baseline: Map<string, number>;
let tables = 0;

/** Handles and requests alive in this process, by kind, for the leak check. */
function resources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

beforeAll(async () => {
  baseline = resources();
  dynamo = await startLocalDynamo();
});

afterAll(async () => {
  await dynamo.close();
  const start = Date.now();
  for (;;) {
    const now = resources();
    if ([...now].every(([k, n]) => n <= (baseline.get(k) ?? 0))) break;
    if (Date.now() - start > 5_000) {
      throw new Error(`leaked handles: ${JSON.stringify([...now])} vs ${JSON.stringify([...baseline])}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
});

const registries: DynamoRegistry[] = [];
function open(tableName: string, over: Partial<ConstructorParameters<typeof DynamoRegistry>[0]> = {}) {
  const r = new DynamoRegistry({ tableName, clientOptions: dynamo.clientOptions, clock: () => T0, ...over });
  registries.push(r);
  return r;
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!(await condition())) {
    if (Date.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function failure(p: Promise<unknown>): Promise<{ err: Error & { code?: string }; ms: number }> {
  const start = Date.now();
  const err = await p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );
  expect(err, "expected a failure").toBeInstanceOf(Error);
  return { err: err as Error & { code?: string }, ms: Date.now() - start };
}

describeRegistryContract(
  "dynamodb (dynalite)",
  async () => {
    // A fresh table per test in the one server: no test sees another's items.
    const tableName = `${dynamo.tableName}-c${++tables}`;
    await dynamo.createTable(tableName);
    const opened: DynamoRegistry[] = [];
    return {
      open: async () => {
        const r = new DynamoRegistry({ tableName, clientOptions: dynamo.clientOptions, clock: () => T0 });
        opened.push(r);
        return r;
      },
      corrupt: async (kind, tenant) => {
        const item: Record<string, AttributeValue> =
          kind === "lease"
            ? // A lease whose numbers are text: written by hand, or by a future version.
              { pk: { S: "instances" }, sk: { S: "bad" }, peerAddress: { S: "x:1" }, incarnation: { S: "1" } }
            : // A row filed under one agent that claims to be another (a forged key).
              {
                pk: { S: `owners#${tenant}` },
                sk: { S: "i9#bad" },
                tenant: { S: tenant },
                agentId: { S: "someone-else" },
                instanceId: { S: "i9" },
                ownerInstance: { S: "i9" },
                incarnation: { N: "1" },
                session: { N: "1" },
                connectedAt: { N: "1" },
              };
        await dynamo.client.send(new PutItemCommand({ TableName: tableName, Item: item }));
      },
      cleanup: async () => {
        for (const r of opened) await r.close();
      },
    };
  },
  { corruptible: true },
);

describe("dynamodb registry", () => {
  afterAll(async () => {
    for (const r of registries.splice(0)) await r.close();
  });

  it("costs one write per heartbeat and one Query per listing", async () => {
    const registry = open(dynamo.tableName);
    dynamo.calls.clear();
    await registry.heartbeat(lease("cost"));
    await registry.listInstances();
    await registry.ownersOf("acme");
    expect(Object.fromEntries(dynamo.calls)).toEqual({ PutItem: 1, Query: 2 });
  });

  it("fails with ERR_STORE_UNAVAILABLE within a second when the port refuses, and works again after", async () => {
    const registry = open(dynamo.tableName);
    await dynamo.stop();
    try {
      const { err, ms } = await failure(registry.claim(row("acme", "a", "i1")));
      expect(err).toMatchObject({ name: "RegistryUnavailableError", code: "ERR_STORE_UNAVAILABLE" });
      expect(err.message).toMatch(/ECONNREFUSED/);
      expect(ms).toBeLessThan(1_000);
    } finally {
      await dynamo.start();
    }
    expect(await registry.claim(row("acme", "a", "i1"))).toBe("claimed");
  });

  it("fails within attempts × request timeout when the endpoint accepts and never answers", async () => {
    const registry = open(dynamo.tableName, {
      clientOptions: {
        ...dynamo.clientOptions,
        requestTimeoutMs: 300,
        connectTimeoutMs: 300,
        maxAttempts: 2,
      },
    });
    await dynamo.blackhole();
    try {
      const { err, ms } = await failure(registry.listInstances());
      expect(err).toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
      expect(err.message).toMatch(/TimeoutError|timed out|requestTimeout/i);
      expect(ms).toBeGreaterThanOrEqual(500);
      expect(ms).toBeLessThan(2_500);
    } finally {
      await dynamo.start();
    }
  });

  it("retries throttling with backoff until it succeeds", async () => {
    const registry = open(dynamo.tableName);
    dynamo.calls.clear();
    dynamo.throttle(2, "ProvisionedThroughputExceededException");
    expect(await registry.claim(row("acme", "throttled", "i1"))).toBe("claimed");
    expect(dynamo.calls.get("PutItem")).toBe(3);
    dynamo.throttle(2, "ThrottlingException");
    expect((await registry.ownersOf("acme")).items.map((r) => r.agentId)).toContain("throttled");
    expect(dynamo.calls.get("Query")).toBe(3);
  });

  it("gives up on throttling after the client's attempts, as ERR_STORE_UNAVAILABLE", async () => {
    const registry = open(dynamo.tableName, { clientOptions: { ...dynamo.clientOptions, maxAttempts: 2 } });
    dynamo.calls.clear();
    dynamo.throttle(5);
    try {
      const { err } = await failure(registry.heartbeat(lease("throttled")));
      expect(err).toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
      expect(err.message).toMatch(/ThrottlingException.*after 2 attempts/);
      expect(dynamo.calls.get("PutItem")).toBe(2);
    } finally {
      dynamo.throttle(0);
    }
  });

  it("keeps the keepers serving through an outage and catches up when DynamoDB returns", async () => {
    const tableName = `${dynamo.tableName}-outage`;
    await dynamo.createTable(tableName);
    // Fail fast while down, so the scenario takes seconds.
    const clientOptions = {
      ...dynamo.clientOptions,
      requestTimeoutMs: 300,
      connectTimeoutMs: 300,
      maxAttempts: 2,
    };
    const registry = open(tableName, { clientOptions, clock: Date.now });
    const reader = open(tableName, { clock: Date.now });
    const keeper = new LeaseKeeper({
      registry,
      instanceId: "i1",
      peerAddress: "127.0.0.1:8135",
      heartbeatMs: 200,
      leaseMs: 1_500,
    });
    const writer = new OwnershipWriter({ registry, instanceId: "i1", incarnation: keeper.incarnation });
    keeper.on("acquired", () => writer.resync());
    try {
      keeper.start();
      const before = writer.claimed("acme", "before");
      const leaves = writer.claimed("acme", "leaves");
      await until(() => keeper.held());
      expect(await writer.flush(5_000)).toBe(true);

      await dynamo.stop();
      // Both return at once with DynamoDB down (they are synchronous): the writes are queued.
      writer.released(leaves);
      const during = writer.claimed("acme", "during");
      await until(() => !keeper.held() && writer.state().consecutiveFailures > 0);
      expect(keeper.state()).toMatchObject({ lost: false, lastError: { code: "ERR_STORE_UNAVAILABLE" } });
      expect(writer.state()).toMatchObject({ pendingClaims: 1, pendingReleases: 1 });

      // While we were away, a sweeper elsewhere removed our row of "before" (our lease expired).
      await dynamo.start();
      await reader.release(before);
      await until(() => keeper.held());
      expect(await writer.flush(10_000)).toBe(true);
      const rows = (await reader.ownersOf("acme")).items.map((r) => `${r.agentId}.${r.session}`).sort();
      expect(rows).toEqual([`before.${before.session}`, `during.${during.session}`]);
      expect(keeper.state()).toMatchObject({ consecutiveFailures: 0, lastError: null });
    } finally {
      writer.close();
      await keeper.stop();
      await dynamo.start();
    }
    const [l] = (await reader.listInstances()).items;
    expect(l).toMatchObject({ instanceId: "i1", draining: true });
  });

  it("sweeps a dead instance through the index, and nothing of the live ones", async () => {
    const tableName = `${dynamo.tableName}-sweep`;
    await dynamo.createTable(tableName);
    const registry = open(tableName);
    await registry.heartbeat(lease("dead", { heartbeatAt: T0 - 60_000 }));
    await registry.heartbeat(lease("live"));
    for (const tenant of ["acme", "beta"]) {
      await registry.claim(row(tenant, "a", "dead"));
      await registry.claim(row(tenant, "a", "live"));
    }
    const sweeper = new Sweeper({ registry, instanceId: "live", clock: () => T0 });
    dynamo.calls.clear();
    expect(await sweeper.sweepOnce()).toEqual({ instances: ["dead"], rows: 2, unreadable: [] });
    expect(dynamo.calls.get("Scan")).toBeUndefined();
    for (const tenant of ["acme", "beta"]) {
      expect((await registry.ownersOf(tenant)).items.map((r) => r.instanceId)).toEqual(["live"]);
    }
    expect((await registry.listInstances()).items.map((l) => l.instanceId)).toEqual(["live"]);
  });
});
