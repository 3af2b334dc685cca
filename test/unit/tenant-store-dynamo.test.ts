/**
 * The DynamoDB tenant store on dynalite: the shared TenantStore contract, then what only it has
 * (the generation counter that makes a watch's poll one read, the full re-list that catches an
 * edit nobody announced, an unreachable table), and that no process building an AWS SDK client
 * prints the SDK's Node.js version warning.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { GetItemCommand, PutItemCommand, UpdateItemCommand } from "@aws-sdk/client-dynamodb";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { caSecretJson } from "../../lib/deploy/secret-layout.js";
import { openDynamoTenantStore } from "../../lib/tenancy/dynamo-store/dynamo-tenant-store.js";
import { MAX_RECORD_BYTES } from "../../lib/tenancy/limits.js";
import { encodeTenantRecord } from "../../lib/tenancy/record-codec.js";
import type { TenantStore, TenantWatch } from "../../lib/tenancy/store.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import { makeFleet, tempDir } from "../helpers/fleet.js";
import { spawnKgw } from "../helpers/kgw-process.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki } from "../helpers/pki.js";
import { type CorruptionKind, createTenant, describeTenantStoreContract } from "./tenant-store.contract.js";

let dynamo: LocalDynamo;
let tables = 0;

beforeAll(async () => {
  dynamo = await startLocalDynamo();
});
afterAll(async () => {
  await dynamo.close();
});

async function freshTable(): Promise<string> {
  const name = `${dynamo.tableName}-t${++tables}`;
  await dynamo.createTable(name);
  return name;
}

/**
 * Writes bad data into the item's `record`, keeping its version, as a hand edit in the console
 * would. It bumps the generation as any tool that edits tenants should; an edit that does not is
 * caught by the full re-list (tested below).
 */
async function corruptItem(tableName: string, id: string, how: CorruptionKind): Promise<void> {
  const key = { pk: { S: "tenants" }, sk: { S: id } };
  const { Item } = await dynamo.client.send(new GetItemCommand({ TableName: tableName, Key: key }));
  const valid = JSON.parse(Item!.record!.S!) as Record<string, unknown>;
  const content: Record<CorruptionKind, () => string> = {
    garbage: () => "{\u0000\u00ff not json",
    "not-a-record": () => JSON.stringify({ schema: 1, id }),
    oversized: () => JSON.stringify(valid) + " ".repeat(MAX_RECORD_BYTES),
    "wrong-id": () => JSON.stringify({ ...valid, id: "good" }),
    "unknown-field": () => JSON.stringify({ ...valid, admin: true }),
  };
  await dynamo.client.send(
    new PutItemCommand({ TableName: tableName, Item: { ...Item!, record: { S: content[how]() } } }),
  );
  await bump(tableName);
}

async function bump(tableName: string): Promise<void> {
  await dynamo.client.send(
    new UpdateItemCommand({
      TableName: tableName,
      Key: { pk: { S: "meta" }, sk: { S: "tenants-generation" } },
      UpdateExpression: "ADD generation :one",
      ExpressionAttributeValues: { ":one": { N: "1" } },
    }),
  );
}

describeTenantStoreContract("dynamodb (dynalite)", async () => {
  const tableName = await freshTable();
  return {
    open: async () => openDynamoTenantStore({ tableName, clientOptions: dynamo.clientOptions }),
    corrupt: (id, how) => corruptItem(tableName, id, how),
    cleanup: async () => {},
  };
});

describe("dynamodb tenant store", () => {
  const stores: TenantStore[] = [];
  const watches: TenantWatch[] = [];
  const open = (tableName: string, over: Partial<Parameters<typeof openDynamoTenantStore>[0]> = {}) => {
    const s = openDynamoTenantStore({ tableName, clientOptions: dynamo.clientOptions, ...over });
    stores.push(s);
    return s;
  };
  afterAll(async () => {
    for (const w of watches) w.close();
    for (const s of stores) await s.close();
  });

  async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
    const start = Date.now();
    while (!condition()) {
      if (Date.now() - start > timeoutMs) throw new Error(`condition not met within ${timeoutMs}ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it("costs a watcher one GetItem per poll while nothing changes, and one list when something does", async () => {
    const tableName = await freshTable();
    const store = open(tableName);
    for (const id of ["a1", "a2", "a3"]) await createTenant(store, id);
    const watch = store.watch({ intervalMs: 20 });
    watches.push(watch);
    await watch.ready;
    dynamo.calls.clear();
    // Five polls, however long the machine takes for them: each read the generation, none listed.
    await until(() => (dynamo.calls.get("GetItem") ?? 0) >= 5);
    expect(dynamo.calls.get("Query")).toBeUndefined();
    await createTenant(open(tableName), "a4");
    await until(() => watch.get("a4") !== undefined);
    expect(dynamo.calls.get("Query")).toBe(1);
  });

  it("sees an edit that did not bump the generation at the next full re-list", async () => {
    const tableName = await freshTable();
    const store = open(tableName, { fullRelistMs: 200 });
    await createTenant(store, "acme");
    const watch = store.watch({ intervalMs: 20 });
    watches.push(watch);
    await watch.ready;
    const { record } = await createTenant(store, "quiet");
    // Written straight into the table, as a writer that died before its bump leaves it.
    const next = { ...record, version: 2, displayName: "renamed" };
    await dynamo.client.send(
      new PutItemCommand({
        TableName: tableName,
        Item: {
          pk: { S: "tenants" },
          sk: { S: "quiet" },
          record: { S: encodeTenantRecord(next) },
          version: { N: "2" },
        },
      }),
    );
    await until(() => watch.get("quiet")?.displayName === "renamed", 3_000);
  });

  it("reports an unreachable table as ERR_STORE_UNAVAILABLE in bounded time, and a conflict as ERR_CONFLICT", async () => {
    const tableName = await freshTable();
    const store = open(tableName);
    const { record } = await createTenant(store, "acme");
    await dynamo.stop();
    const started = Date.now();
    try {
      await expect(store.get("acme")).rejects.toMatchObject({
        code: "ERR_STORE_UNAVAILABLE",
        message: expect.stringContaining("tenant store: cannot read tenant acme"),
      });
      expect(Date.now() - started).toBeLessThan(1_000);
    } finally {
      await dynamo.start();
    }
    await store.put({ ...record, version: 2 });
    await expect(store.put({ ...record, version: 2, displayName: "late" })).rejects.toMatchObject({
      code: "ERR_CONFLICT",
    });
  });

  it("refuses a record whose version attribute disagrees with its text", async () => {
    const tableName = await freshTable();
    const store = open(tableName);
    await createTenant(store, "acme");
    await dynamo.client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { pk: { S: "tenants" }, sk: { S: "acme" } },
        UpdateExpression: "SET version = :v",
        ExpressionAttributeValues: { ":v": { N: "7" } },
      }),
    );
    await expect(store.get("acme")).rejects.toMatchObject({ code: "ERR_STORE_CORRUPT" });
  });
});

/** Runs `kgw tenant …` as an operator would: a real process, configured by the environment only. */
async function kgw(env: Record<string, string>, ...args: string[]) {
  const p = spawnKgw(["tenant", ...args], { KGW_TENANT_STORE_DIR: "", ...env });
  const { code } = await p.exited;
  return { code, output: p.output.join("") };
}

describe("kgw tenant --table", () => {
  it("creates, lists and deletes tenants in the DynamoDB store, quietly", async () => {
    const tableName = await freshTable();
    const created = await kgw(
      dynamo.env,
      "create",
      "acme",
      "--table",
      tableName,
      "--bundle=false",
      "--output=json",
    );
    expect(created.code, created.output).toBe(0);
    expect(JSON.parse(created.output)).toMatchObject({ tenant: { id: "acme", version: 1 } });
    // The table is the store: a server's store sees the tenant.
    const store = openDynamoTenantStore({ tableName, clientOptions: dynamo.clientOptions });
    try {
      expect((await store.get("acme"))?.state).toBe("active");
    } finally {
      await store.close();
    }
    // As an operator's shell has it: without the SDK's switch (this test process sets it).
    const listed = await kgw(
      { ...dynamo.env, KGW_TENANT_TABLE: tableName, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "" },
      "list",
    );
    expect(listed.code, listed.output).toBe(0);
    expect(listed.output).toContain("acme");
    // Nothing but the command's own output: no SDK warning on stderr (Node.js 20 gets one otherwise).
    expect(listed.output).not.toMatch(/Warning|NodeVersionSupport/);
    expect((await kgw(dynamo.env, "delete", "acme", "--table", tableName, "--yes")).code).toBe(0);
  });

  it("refuses --store-dir and --table together, and fails in bounded time when the table is unreachable", async () => {
    const both = await kgw(dynamo.env, "list", "--table", "t-1", "--store-dir", "/tmp/x");
    expect(both.code).toBe(2);
    expect(both.output).toContain("--store-dir and --table");
    const started = Date.now();
    const down = await kgw(
      { ...dynamo.env, AWS_ENDPOINT_URL_DYNAMODB: "http://127.0.0.1:9" },
      "list",
      "--table",
      dynamo.tableName,
    );
    expect(down.code).toBe(1);
    expect(down.output).toMatch(/kgw tenant list: tenant store: cannot list tenants: .*ECONNREFUSED/);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});

/**
 * The SDK warns, once per process, when a client is built on Node.js below 22: nine lines on
 * stderr, `(node:…) Warning: NodeVersionSupportWarning: … will require node >=22`. Each process
 * here builds its clients with the operator's environment as it comes, without the SDK's switch
 * (this test process and the dynalite helper set it for themselves). On Node.js 22 and later the
 * SDK has nothing to say and nothing is silenced; CI runs these on both 20 and 24.
 */
describe("no AWS SDK Node.js version warning from a kgw process", () => {
  const SDK_WARNING = /NodeVersionSupport|node >=22|\(node:\d+\) Warning/;
  const operatorEnv = () => ({ ...dynamo.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: "" });

  it("kgw server on a registry table (its registry and tenant store), from start to stop", async () => {
    const pki = await getTestPki();
    const peer = await getPeerPki(pki);
    const work = tempDir("kgw-sdk-warning-");
    try {
      const [server] = await makeFleet(
        { pki, peerFiles: peer.files, table: await freshTable(), dynamoEnv: operatorEnv() },
        1,
        work.dir,
      );
      await server!.start();
      // It did use the table through its SDK client: requests counted by operation.
      expect(await server!.metrics()).toMatch(/^kgw_fleet_registry_requests_total\{[^}]*\} [1-9]/m);
      expect(await server!.terminate()).toEqual({ code: 0, signal: null });
      expect(server!.log()).not.toMatch(SDK_WARNING);
    } finally {
      work.remove();
    }
  });

  it("kgw tenant --ca-secret (Secrets Manager), with a file store so that no other client comes first", async () => {
    const pki = await getTestPki();
    const secretId = "kgw/gateway-ca";
    // Secrets Manager's GetSecretValue (AWS JSON 1.1) for the one secret, as the SDK sends it.
    const requests: string[] = [];
    const secrets: Server = createServer(async (req: IncomingMessage, res) => {
      let body = "";
      for await (const chunk of req) body += String(chunk);
      requests.push(`${req.headers["x-amz-target"]} ${JSON.parse(body).SecretId}`);
      res.setHeader("content-type", "application/x-amz-json-1.1");
      res.end(
        JSON.stringify({
          Name: secretId,
          SecretString: caSecretJson({ certificate: pki.ca.certPem, privateKey: pki.ca.keyPem }),
        }),
      );
    });
    await new Promise<void>((r) => secrets.listen(0, "127.0.0.1", r));
    const work = tempDir("kgw-sdk-warning-");
    try {
      const created = await kgw(
        {
          ...operatorEnv(),
          AWS_ENDPOINT_URL_SECRETS_MANAGER: `http://127.0.0.1:${(secrets.address() as AddressInfo).port}`,
          KGW_GATEWAY_ADDRESS: "gateway.example.com:8132",
        },
        "create",
        "acme",
        `--store-dir=${path.join(work.dir, "store")}`,
        `--ca-secret=${secretId}`,
        `--out=${path.join(work.dir, "bundle")}`,
        "--output=json",
      );
      expect(created.code, created.output).toBe(0);
      // The CA did come from the secret: the bundle was issued with it.
      expect(requests).toEqual([`secretsmanager.GetSecretValue ${secretId}`]);
      expect(created.output).not.toMatch(SDK_WARNING);
    } finally {
      work.remove();
      await new Promise<void>((r) => secrets.close(() => r()));
    }
  });
});
