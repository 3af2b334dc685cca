/**
 * The file store's directory:
 *
 *   <dir>/                       0700
 *     kgw-tenant-store.json      0600  marker: {"format":"kgw-tenant-store","schema":1}
 *     tenants/<id>.json          0600  one record per tenant (record-codec.ts), tombstones too
 *     tmp/                       0700  temporary files of writes in progress (same file system)
 *     lock, lock-break                 present only while a write is in progress (lock-file.ts)
 *
 * The marker keeps the store from adopting a directory that holds something else (a mistyped
 * --store-dir pointing at /etc must not become a tenant store).
 */
import { lstat, mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { TenantStoreUnavailableError } from "../errors.js";
import { FILE_MODE } from "./atomic-write.js";
import { code, ioError } from "./lock-file.js";

export const DIR_MODE = 0o700;
const MARKER = "kgw-tenant-store.json";
const MARKER_CONTENT = { format: "kgw-tenant-store", schema: 1 } as const;
const OWN_ENTRIES: ReadonlySet<string> = new Set([MARKER, "tenants", "tmp", "lock", "lock-break"]);
/** A write takes milliseconds; a temporary file an hour old was left by a crash. */
const ABANDONED_TEMP_MS = 3_600_000;

export interface StoreLayout {
  readonly dir: string;
  readonly tenants: string;
  readonly tmp: string;
  readonly lock: string;
  tenantFile(id: string): string;
}

export function layoutOf(dir: string): StoreLayout {
  const root = path.resolve(dir);
  const tenants = path.join(root, "tenants");
  return {
    dir: root,
    tenants,
    tmp: path.join(root, "tmp"),
    lock: path.join(root, "lock"),
    tenantFile: (id) => path.join(tenants, `${id}.json`),
  };
}

/**
 * Checks (and with `create`, makes) the store directory. Refuses a directory others can write
 * to (they could forge tenants), one without our marker that is not empty, and a missing one
 * unless asked to create it (a typo in a read-only command must not create a store).
 */
export async function prepareLayout(layout: StoreLayout, create: boolean): Promise<void> {
  const st = await stat(layout.dir).catch((err: unknown) => {
    if (code(err) === "ENOENT") return undefined;
    throw ioError(`cannot open ${layout.dir}`, err);
  });
  if (!st) {
    if (!create) throw new TenantStoreUnavailableError(`no tenant store at ${layout.dir}`);
    await mkdir(layout.dir, { recursive: true, mode: DIR_MODE }).catch((err: unknown) => {
      throw ioError(`cannot create ${layout.dir}`, err);
    });
  } else if (!st.isDirectory()) {
    throw new TenantStoreUnavailableError(`${layout.dir} is not a directory`);
  } else if (process.platform !== "win32" && (st.mode & 0o022) !== 0) {
    throw new TenantStoreUnavailableError(
      `${layout.dir} is writable by group or others, who could forge tenants: chmod 700 it`,
    );
  }
  await checkMarker(layout, create);
  for (const sub of [layout.tenants, layout.tmp]) {
    await mkdir(sub, { mode: DIR_MODE }).catch((err: unknown) => {
      if (code(err) !== "EEXIST") throw ioError(`cannot create ${sub}`, err);
    });
  }
  await removeAbandonedTemps(layout.tmp);
}

async function checkMarker(layout: StoreLayout, create: boolean): Promise<void> {
  const file = path.join(layout.dir, MARKER);
  let text: string | undefined;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if (code(err) !== "ENOENT") throw ioError(`cannot read ${file}`, err);
  }
  if (text === undefined) {
    // Our own entries may exist already: another process may be creating the store right now.
    const foreign = (await readdir(layout.dir)).filter((e) => !OWN_ENTRIES.has(e));
    if (!create || foreign.length > 0) {
      throw new TenantStoreUnavailableError(
        `${layout.dir} is not a kgw tenant store (no ${MARKER})${foreign.length > 0 ? " and holds other files" : ""}`,
      );
    }
    try {
      // O_EXCL: of two processes creating the store at once, one writes the marker, both use it.
      await writeFile(file, `${JSON.stringify(MARKER_CONTENT)}\n`, { flag: "wx", mode: FILE_MODE });
      return;
    } catch (err) {
      if (code(err) !== "EEXIST") throw ioError(`cannot create ${file}`, err);
      return checkMarker(layout, false);
    }
  }
  let marker: unknown;
  try {
    marker = JSON.parse(text);
  } catch {
    marker = undefined;
  }
  const m = marker as Partial<typeof MARKER_CONTENT> | undefined;
  if (m?.format !== MARKER_CONTENT.format) {
    throw new TenantStoreUnavailableError(`${file} is not a kgw tenant store marker`);
  }
  if (m.schema !== MARKER_CONTENT.schema) {
    throw new TenantStoreUnavailableError(
      `${layout.dir} has store schema ${JSON.stringify(m.schema)}; this version reads schema ${MARKER_CONTENT.schema}`,
    );
  }
}

async function removeAbandonedTemps(tmp: string): Promise<void> {
  const names = await readdir(tmp).catch(() => [] as string[]);
  const cutoff = Date.now() - ABANDONED_TEMP_MS;
  for (const name of names) {
    const file = path.join(tmp, name);
    const st = await lstat(file).catch(() => undefined);
    if (st?.isFile() && st.mtimeMs < cutoff) await rm(file, { force: true });
  }
}
