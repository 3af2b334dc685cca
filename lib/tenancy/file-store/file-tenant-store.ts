/**
 * The embedded tenant store: one JSON file per tenant in a directory (layout.ts), for local runs
 * and single-host deployments. Same contract as the DynamoDB store (../store.ts):
 *
 * - Reads take no lock: every write replaces a file by rename (atomic-write.ts), so a reader
 *   sees a whole record, old or new. Unchanged files are not re-parsed (a cache keyed by inode,
 *   size and mtime: a rename always brings a new inode), so a watch's poll costs a readdir and
 *   a stat per tenant.
 * - Writes are conditional: under the store's lock (lock-file.ts) the writer reads the stored
 *   version, compares it with the one its record was based on, and only then renames. Two
 *   processes writing at once therefore behave as two DynamoDB clients: one wins, the other
 *   gets ERR_CONFLICT and re-reads.
 */
import { type BigIntStats, constants } from "node:fs";
import { type FileHandle, lstat, open, readdir } from "node:fs/promises";
import { GatewayError } from "../../errors.js";
import { TenantStoreCorruptError, TenantVersionConflictError } from "../errors.js";
import { MAX_RECORD_BYTES } from "../limits.js";
import type { TenantRecord } from "../model.js";
import { PollingTenantWatch } from "../polling-watch.js";
import { decodeTenantRecord, encodeTenantRecord } from "../record-codec.js";
import type { TenantListing, TenantStore, TenantWatch, WatchOptions } from "../store.js";
import { checkTenantId, isValidTenantId } from "../tenant-id.js";
import { writeFileAtomically } from "./atomic-write.js";
import { layoutOf, prepareLayout, type StoreLayout } from "./layout.js";
import {
  code,
  DEFAULT_LOCK_STALE_MS,
  DEFAULT_LOCK_WAIT_MS,
  ioError,
  type LockTiming,
  withLock,
} from "./lock-file.js";

export interface FileTenantStoreOptions {
  /** Create the directory if it does not exist (commands that write); default false. */
  create?: boolean;
  lock?: Partial<LockTiming>;
}

const RECORD_FILE = /^([a-z0-9-]{1,63})\.json$/;

/** Opens (with `create`, makes) the store in `dir`. */
export async function openFileTenantStore(
  dir: string,
  options: FileTenantStoreOptions = {},
): Promise<TenantStore> {
  const layout = layoutOf(dir);
  await prepareLayout(layout, options.create ?? false);
  return new FileTenantStore(layout, {
    waitMs: options.lock?.waitMs ?? DEFAULT_LOCK_WAIT_MS,
    staleMs: options.lock?.staleMs ?? DEFAULT_LOCK_STALE_MS,
  });
}

interface Cached {
  ino: bigint;
  size: bigint;
  mtimeNs: bigint;
  record: TenantRecord;
}

class FileTenantStore implements TenantStore {
  private readonly cache = new Map<string, Cached>();

  constructor(
    private readonly layout: StoreLayout,
    private readonly lockTiming: LockTiming,
  ) {}

  async get(id: string): Promise<TenantRecord | undefined> {
    const checked = checkTenantId(id);
    try {
      return await this.read(checked);
    } catch (err) {
      throw err instanceof GatewayError
        ? err
        : ioError(`cannot read ${this.layout.tenantFile(checked)}`, err);
    }
  }

  async list(): Promise<TenantListing> {
    let names: string[];
    try {
      names = await readdir(this.layout.tenants);
    } catch (err) {
      throw ioError(`cannot list ${this.layout.tenants}`, err);
    }
    const tenants: TenantRecord[] = [];
    const unreadable: TenantStoreCorruptError[] = [];
    // Anything else in the directory (an editor's backup, a stray file) is not a record.
    const ids = names.map((n) => RECORD_FILE.exec(n)?.[1]).filter((id): id is string => isValidTenantId(id));
    for (const id of ids.sort()) {
      try {
        const record = await this.read(id);
        if (record) tenants.push(record);
      } catch (err) {
        unreadable.push(
          err instanceof TenantStoreCorruptError
            ? err
            : new TenantStoreCorruptError(this.layout.tenantFile(id), `cannot be read: ${code(err) ?? err}`, {
                tenantId: id,
                cause: err,
              }),
        );
      }
    }
    for (const id of this.cache.keys()) if (!ids.includes(id)) this.cache.delete(id);
    return { tenants, unreadable };
  }

  async put(next: TenantRecord): Promise<void> {
    const id = checkTenantId(next.id);
    const text = encodeTenantRecord(next);
    const expected = next.version - 1;
    const file = this.layout.tenantFile(id);
    try {
      await withLock(this.layout.lock, this.lockTiming, async (lock) => {
        // A corrupt current record throws here: its version is unknown, so nothing may replace
        // it until an operator has looked (see docs/TENANCY.md).
        const current = await this.read(id);
        if ((current?.version ?? 0) !== expected) throw new TenantVersionConflictError(id, expected);
        await writeFileAtomically(this.layout.tmp, file, text, () => lock.assertHeld());
      });
    } catch (err) {
      throw err instanceof GatewayError ? err : ioError(`cannot write ${file}`, err);
    }
  }

  watch(options?: WatchOptions): TenantWatch {
    return new PollingTenantWatch(() => this.list(), options);
  }

  async close(): Promise<void> {
    this.cache.clear();
  }

  /** The record in `id`'s file, from the cache when the file has not changed since. */
  private async read(id: string): Promise<TenantRecord | undefined> {
    const file = this.layout.tenantFile(id);
    const corrupt = (reason: string) => new TenantStoreCorruptError(file, reason, { tenantId: id });
    const st = await lstat(file, { bigint: true }).catch((err: unknown) => {
      if (code(err) === "ENOENT") return undefined;
      throw err;
    });
    if (!st) {
      this.cache.delete(id);
      return undefined;
    }
    // A symbolic link could point anywhere (another store, /dev/zero); records are plain files.
    if (!st.isFile()) throw corrupt("not a regular file");
    const cached = this.cache.get(id);
    if (cached && cached.ino === st.ino && cached.size === st.size && cached.mtimeNs === st.mtimeNs) {
      return cached.record;
    }
    if (st.size > BigInt(MAX_RECORD_BYTES)) throw corrupt(`larger than ${MAX_RECORD_BYTES} bytes`);
    let handle: FileHandle;
    try {
      handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (err) {
      if (code(err) === "ENOENT") return undefined;
      if (code(err) === "ELOOP") throw corrupt("not a regular file");
      throw err;
    }
    let text: string;
    let opened: BigIntStats;
    try {
      opened = await handle.stat({ bigint: true });
      // Read at most one byte past the limit: a file that grew since lstat is still bounded.
      const buffer = Buffer.alloc(MAX_RECORD_BYTES + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      if (bytesRead > MAX_RECORD_BYTES) throw corrupt(`larger than ${MAX_RECORD_BYTES} bytes`);
      text = buffer.subarray(0, bytesRead).toString("utf8");
    } finally {
      await handle.close();
    }
    const record = decodeTenantRecord(text, { location: file, tenantId: id });
    this.cache.set(id, { ino: opened.ino, size: opened.size, mtimeNs: opened.mtimeNs, record });
    return record;
  }
}
