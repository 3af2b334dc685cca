/** The file tenant store: the shared contract, then what only files have (modes, locks, processes). */
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import { mkdtemp, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { openFileTenantStore } from "../../lib/tenancy/file-store/file-tenant-store.js";
import { MAX_RECORD_BYTES } from "../../lib/tenancy/limits.js";
import type { TenantStore } from "../../lib/tenancy/store.js";
import { type CorruptionKind, createTenant, describeTenantStoreContract } from "./tenant-store.contract.js";

const RACER = fileURLToPath(new URL("../helpers/tenant-store-racer.ts", import.meta.url));

async function tempDir(): Promise<string> {
  return mkdtemp(path.join(tmpdir(), "kgw-tenant-store-"));
}

const recordFile = (dir: string, id: string) => path.join(dir, "tenants", `${id}.json`);

async function corruptFile(dir: string, id: string, how: CorruptionKind): Promise<void> {
  const file = recordFile(dir, id);
  const valid = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
  const content: Record<CorruptionKind, () => string> = {
    garbage: () => "{\u0000\u00ff not json",
    "not-a-record": () => JSON.stringify({ schema: 1, id }),
    // A valid record padded past the limit: refused on size alone, before parsing.
    oversized: () => JSON.stringify(valid) + " ".repeat(MAX_RECORD_BYTES),
    "wrong-id": () => JSON.stringify({ ...valid, id: "good" }),
    "unknown-field": () => JSON.stringify({ ...valid, admin: true }),
  };
  await writeFile(file, content[how]());
}

describeTenantStoreContract("file", async () => {
  const dir = await tempDir();
  return {
    open: () => openFileTenantStore(dir, { create: true }),
    corrupt: (id, how) => corruptFile(dir, id, how),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe("file tenant store", () => {
  let dir: string;
  const stores: TenantStore[] = [];
  const open = async (options: Parameters<typeof openFileTenantStore>[1] = { create: true }) => {
    const s = await openFileTenantStore(dir, options);
    stores.push(s);
    return s;
  };

  beforeEach(async () => {
    dir = path.join(await tempDir(), "store");
  });
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    await rm(path.dirname(dir), { recursive: true, force: true });
  });

  describe("the directory", () => {
    it("is created 0700 with its files 0600", async () => {
      await createTenant(await open(), "acme");
      const mode = async (p: string) => (await stat(p)).mode & 0o777;
      expect(await mode(dir)).toBe(0o700);
      expect(await mode(path.join(dir, "tenants"))).toBe(0o700);
      expect(await mode(path.join(dir, "tmp"))).toBe(0o700);
      expect(await mode(recordFile(dir, "acme"))).toBe(0o600);
      expect(await mode(path.join(dir, "kgw-tenant-store.json"))).toBe(0o600);
      // No lock left behind, no temporary file.
      expect(fs.existsSync(path.join(dir, "lock"))).toBe(false);
      expect(fs.readdirSync(path.join(dir, "tmp"))).toEqual([]);
    });

    it("is not created by a command that only reads", async () => {
      await expect(openFileTenantStore(dir)).rejects.toMatchObject({
        code: "ERR_STORE_UNAVAILABLE",
        message: expect.stringContaining("no tenant store"),
      });
      expect(fs.existsSync(dir)).toBe(false);
    });

    it("refuses a directory others may write to", async () => {
      await open();
      fs.chmodSync(dir, 0o777);
      await expect(openFileTenantStore(dir)).rejects.toMatchObject({
        code: "ERR_STORE_UNAVAILABLE",
        message: expect.stringContaining("writable by group or others"),
      });
    });

    it("refuses to adopt a directory holding other files (a mistyped --store-dir)", async () => {
      fs.mkdirSync(dir, { mode: 0o700 });
      fs.writeFileSync(path.join(dir, "passwd"), "root:x:0:0\n");
      await expect(openFileTenantStore(dir, { create: true })).rejects.toMatchObject({
        code: "ERR_STORE_UNAVAILABLE",
        message: expect.stringContaining("not a kgw tenant store"),
      });
      expect(fs.readdirSync(dir)).toEqual(["passwd"]);
    });

    it("refuses a store of another schema", async () => {
      await open();
      fs.writeFileSync(path.join(dir, "kgw-tenant-store.json"), '{"format":"kgw-tenant-store","schema":2}');
      await expect(openFileTenantStore(dir)).rejects.toMatchObject({
        message: expect.stringContaining("schema 2"),
      });
    });

    it("ignores files that are not records, and reports a symbolic link as corrupt", async () => {
      const store = await open();
      await createTenant(store, "acme");
      fs.writeFileSync(path.join(dir, "tenants", "acme.json~"), "editor backup");
      fs.writeFileSync(path.join(dir, "tenants", "README"), "notes");
      fs.writeFileSync(path.join(dir, "tenants", "Acme.json"), "{}");
      fs.copyFileSync(recordFile(dir, "acme"), path.join(path.dirname(dir), "elsewhere.json"));
      await symlink(path.join(path.dirname(dir), "elsewhere.json"), recordFile(dir, "linked"));
      const { tenants, unreadable } = await store.list();
      expect(tenants.map((t) => t.id)).toEqual(["acme"]);
      expect(unreadable.map((e) => [e.tenantId, e.message.includes("not a regular file")])).toEqual([
        ["linked", true],
      ]);
    });

    it("reports a huge record file without reading it", async () => {
      const store = await open();
      await createTenant(store, "acme");
      const fd = fs.openSync(recordFile(dir, "acme"), "r+");
      fs.ftruncateSync(fd, 1 << 30); // a sparse GiB
      fs.closeSync(fd);
      const started = process.memoryUsage().rss;
      await expect(store.get("acme")).rejects.toMatchObject({ code: "ERR_STORE_CORRUPT" });
      expect(process.memoryUsage().rss - started).toBeLessThan(64 << 20);
    });

    it("removes temporary files a crashed writer left, once they are old", async () => {
      await open();
      const old = path.join(dir, "tmp", "acme.json.deadbeef.tmp");
      const fresh = path.join(dir, "tmp", "acme.json.cafebabe.tmp");
      fs.writeFileSync(old, "half a record");
      fs.writeFileSync(fresh, "a write in progress");
      const twoHoursAgo = new Date(Date.now() - 2 * 3_600_000);
      await utimes(old, twoHoursAgo, twoHoursAgo);
      await open();
      expect(fs.readdirSync(path.join(dir, "tmp"))).toEqual([path.basename(fresh)]);
    });
  });

  describe("the write lock", () => {
    const lockFile = () => path.join(dir, "lock");
    const owner = (pid: number, host = hostname()) =>
      JSON.stringify({ pid, host, token: "t", since: new Date().toISOString() });

    it("breaks a lock whose owner on this host has exited", async () => {
      const store = await open();
      const dead = spawnSync(process.execPath, ["-e", "process.pid"]).pid!;
      fs.writeFileSync(lockFile(), owner(dead));
      await createTenant(store, "acme");
      expect(fs.existsSync(lockFile())).toBe(false);
    });

    it("waits for a live owner, then gives up with a message that says who holds it", async () => {
      const store = await open({ create: true, lock: { waitMs: 300 } });
      const held = owner(process.pid);
      fs.writeFileSync(lockFile(), held);
      const started = Date.now();
      await expect(createTenant(store, "acme")).rejects.toMatchObject({
        code: "ERR_STORE_UNAVAILABLE",
        message: expect.stringContaining(`pid ${process.pid} on ${hostname()}`),
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(await store.get("acme")).toBeUndefined();
      // Still there: a live owner's lock is never broken.
      expect(fs.readFileSync(lockFile(), "utf8")).toBe(held);
    });

    it("respects a fresh lock from another host and breaks an old one", async () => {
      const store = await open({ create: true, lock: { waitMs: 200, staleMs: 5_000 } });
      fs.writeFileSync(lockFile(), owner(1, "another-host"));
      await expect(createTenant(store, "acme")).rejects.toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
      const old = new Date(Date.now() - 10_000);
      await utimes(lockFile(), old, old);
      await createTenant(store, "acme");
      expect((await store.get("acme"))?.version).toBe(1);
    });

    it("treats an unreadable lock as held until it is old", async () => {
      const store = await open({ create: true, lock: { waitMs: 200, staleMs: 5_000 } });
      fs.writeFileSync(lockFile(), "");
      await expect(createTenant(store, "acme")).rejects.toMatchObject({ code: "ERR_STORE_UNAVAILABLE" });
      const old = new Date(Date.now() - 10_000);
      await utimes(lockFile(), old, old);
      await createTenant(store, "acme");
    });
  });

  it("loses no update when two processes race on one tenant", async () => {
    const store = await open();
    await createTenant(store, "acme");
    const PER_PROCESS = 15;
    const racers = [0, 1].map(() => {
      const child = spawn(process.execPath, ["--import", "tsx", RACER, dir, "acme", String(PER_PROCESS)], {
        stdio: ["pipe", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (d: Buffer) => {
        out += d.toString();
      });
      child.stderr.on("data", (d: Buffer) => {
        err += d.toString();
      });
      const ready = new Promise<void>((resolve) => {
        const check = () => (out.startsWith("ready\n") ? resolve() : undefined);
        child.stdout.on("data", check);
      });
      const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
      return { child, ready, exited, output: () => out, errors: () => err };
    });
    await Promise.all(racers.map((r) => r.ready));
    for (const r of racers) r.child.stdin.write("go\n");
    const codes = await Promise.all(racers.map((r) => r.exited));
    expect(codes, racers.map((r) => r.errors()).join("\n")).toEqual([0, 0]);
    const results = racers.map(
      (r) => JSON.parse(r.output().split("\n")[1]!) as { ids: string[]; conflicts: number },
    );
    const added = results.flatMap((r) => r.ids);
    console.log(
      `two processes, ${2 * PER_PROCESS} writes: ${results.map((r) => r.conflicts).join(" + ")} conflicts`,
    );
    expect(added).toHaveLength(2 * PER_PROCESS);
    const final = (await store.get("acme"))!;
    expect(final.version).toBe(1 + 2 * PER_PROCESS);
    expect(final.callerTokens.map((t) => t.id).sort()).toEqual(added.sort());
  });
});
