/**
 * Replaces a file so that readers see the old content or the new, never a mix, and a crash at
 * any point leaves one of the two: write a temporary file in the same file system, fsync it,
 * rename it over the target, fsync the directory (the rename itself is only durable then).
 */
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import path from "node:path";

/** Mode of every file the store writes: tenant records name credentials, for its owner only. */
export const FILE_MODE = 0o600;

export async function writeFileAtomically(
  tempDir: string,
  target: string,
  content: string,
  beforeRename: () => Promise<void> = async () => {},
): Promise<void> {
  const temp = path.join(tempDir, `${path.basename(target)}.${randomBytes(6).toString("hex")}.tmp`);
  try {
    const handle = await open(temp, "wx", FILE_MODE);
    try {
      await handle.writeFile(content);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await beforeRename();
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
  await syncDirectory(path.dirname(target));
}

export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
