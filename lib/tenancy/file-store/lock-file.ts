/**
 * An exclusive lock for the writers of one file store: a file created with O_EXCL (`wx`), which
 * exactly one process can create. Writers hold it for a read, a compare and a rename (a few
 * milliseconds); readers never take it, because every write is an atomic rename.
 *
 * A writer that dies while holding the lock leaves the file behind. It is broken when it is
 * stale: its owner (pid and host, written into it) is a process of this host that no longer
 * exists, or, for an owner on another host or a file without a readable owner, it is older than
 * `staleMs`. Breaking happens under a second lock and only if the file is still the one judged
 * stale, so two processes breaking at once cannot remove a lock a third has just taken. What
 * remains: an owner on another host frozen for longer than `staleMs` in the middle of its write
 * could overlap with the next writer. The file store is for one host; a fleet uses DynamoDB.
 */
import { randomBytes } from "node:crypto";
import { open, stat, unlink } from "node:fs/promises";
import { hostname } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { TenantStoreUnavailableError } from "../errors.js";

export interface LockTiming {
  /** How long to wait for another writer before giving up. */
  waitMs: number;
  /** Age at which a lock whose owner cannot be checked is presumed abandoned. */
  staleMs: number;
}

/** A write holds the lock for milliseconds; 5 s of waiting means something is wrong. */
export const DEFAULT_LOCK_WAIT_MS = 5_000;
/**
 * 30 s is thousands of times longer than a write holds the lock, and short enough that a crashed
 * writer on another host blocks the store only briefly.
 */
export const DEFAULT_LOCK_STALE_MS = 30_000;
/** Retry delay while another writer holds the lock: short, jittered so waiters do not align. */
const RETRY_MIN_MS = 2;
const RETRY_MAX_MS = 25;

interface Owner {
  pid: number;
  host: string;
  /** Random: tells this acquisition apart from any other, even of the same process. */
  token: string;
  since: string;
}

/** What a lock file held when it was looked at, to check later that it is still the same file. */
interface Seen {
  raw: string;
  ino: number;
  mtimeMs: number;
  owner: Owner | undefined;
}

export interface HeldLock {
  /** Throws if the lock was broken by someone else (this writer stalled): call before committing. */
  assertHeld(): Promise<void>;
}

export async function withLock<T>(
  path: string,
  timing: LockTiming,
  critical: (lock: HeldLock) => Promise<T>,
): Promise<T> {
  const owner = await acquire(path, timing);
  const lock: HeldLock = {
    assertHeld: async () => {
      const seen = await look(path);
      if (seen?.owner?.token !== owner.token) {
        throw new TenantStoreUnavailableError(
          `lost the store lock ${path} (this writer stalled and it was broken)`,
        );
      }
    },
  };
  try {
    return await critical(lock);
  } finally {
    await release(path, owner);
  }
}

async function acquire(path: string, timing: LockTiming): Promise<Owner> {
  const deadline = Date.now() + timing.waitMs;
  const owner: Owner = {
    pid: process.pid,
    host: hostname(),
    token: randomBytes(12).toString("hex"),
    since: new Date().toISOString(),
  };
  for (;;) {
    try {
      const handle = await open(path, "wx", 0o600);
      try {
        await handle.writeFile(JSON.stringify(owner));
      } finally {
        await handle.close();
      }
      return owner;
    } catch (err) {
      if (code(err) !== "EEXIST") throw ioError(`cannot create the lock ${path}`, err);
    }
    const seen = await look(path);
    if (seen && isStale(seen, timing.staleMs)) {
      await breakStale(path, seen, timing.staleMs);
      continue;
    }
    if (seen && Date.now() >= deadline) {
      const who = seen.owner
        ? `pid ${seen.owner.pid} on ${seen.owner.host} since ${seen.owner.since}`
        : "an unknown owner";
      throw new TenantStoreUnavailableError(
        `the store is locked by ${who} (${path}); if no kgw command is running, remove that file`,
      );
    }
    if (seen) await sleep(RETRY_MIN_MS + Math.random() * (RETRY_MAX_MS - RETRY_MIN_MS));
  }
}

async function release(path: string, owner: Owner): Promise<void> {
  // Only our own lock: if it was broken while we stalled, the file is someone else's now.
  const seen = await look(path).catch(() => undefined);
  if (seen?.owner?.token === owner.token) await unlink(path).catch(() => {});
}

function isStale(seen: Seen, staleMs: number): boolean {
  const { owner } = seen;
  if (owner && owner.host === hostname()) return !processExists(owner.pid);
  // Another host's process cannot be checked, and a file without an owner may be one being
  // written this instant: only age tells.
  return Date.now() - seen.mtimeMs > staleMs;
}

async function breakStale(path: string, seen: Seen, staleMs: number): Promise<void> {
  const breakPath = `${path}-break`;
  try {
    await (await open(breakPath, "wx", 0o600)).close();
  } catch (err) {
    if (code(err) !== "EEXIST") throw ioError(`cannot create ${breakPath}`, err);
    // Another process is breaking it. Its break lock lives for microseconds; one older than
    // staleMs belongs to a process that died mid-break.
    const st = await stat(breakPath).catch(() => undefined);
    if (st && Date.now() - st.mtimeMs > staleMs) await unlink(breakPath).catch(() => {});
    return;
  }
  try {
    const now = await look(path);
    if (now && now.ino === seen.ino && now.mtimeMs === seen.mtimeMs && now.raw === seen.raw) {
      await unlink(path).catch(() => {});
    }
  } finally {
    await unlink(breakPath).catch(() => {});
  }
}

/** The lock file as it is now, or undefined if there is none. */
async function look(path: string): Promise<Seen | undefined> {
  try {
    // One handle for stat and read, so both describe the same file.
    const handle = await open(path, "r");
    try {
      const st = await handle.stat();
      const raw = await handle.readFile("utf8");
      return { raw, ino: st.ino, mtimeMs: st.mtimeMs, owner: parseOwner(raw) };
    } finally {
      await handle.close();
    }
  } catch (err) {
    if (code(err) === "ENOENT") return undefined;
    throw ioError(`cannot read the lock ${path}`, err);
  }
}

function parseOwner(raw: string): Owner | undefined {
  try {
    const o = JSON.parse(raw) as Partial<Owner>;
    if (
      Number.isSafeInteger(o.pid) &&
      (o.pid as number) > 0 &&
      typeof o.host === "string" &&
      typeof o.token === "string" &&
      typeof o.since === "string"
    ) {
      return o as Owner;
    }
  } catch {
    // Empty (being written) or garbage: no owner to check.
  }
  return undefined;
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is just not ours to signal.
    return code(err) === "EPERM";
  }
}

export function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code;
}

export function ioError(message: string, err: unknown): TenantStoreUnavailableError {
  return new TenantStoreUnavailableError(`${message}: ${code(err) ?? (err as Error)?.message}`, {
    cause: err,
  });
}
