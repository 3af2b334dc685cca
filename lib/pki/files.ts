import { randomBytes } from "node:crypto";
import { mkdir, open, rename, rm } from "node:fs/promises";
import path from "node:path";

const PRIVATE_FILE_MODE = 0o600;
const PUBLIC_FILE_MODE = 0o644;

/**
 * Writes PEM files into `dir` (created 0700 if missing) and returns the path of each, keyed like
 * `files`. Private keys get mode 0600. Each file is written to a temporary name and renamed into
 * place, so an existing, more permissive file is never briefly filled with key material and readers
 * never see a half-written PEM.
 */
export async function writePemFiles<Name extends string>(
  dir: string,
  files: Readonly<Record<Name, string>>,
): Promise<Record<Name, string>> {
  const entries = Object.entries(files) as [Name, string][];
  // Check every name before writing anything, so a bad name cannot leave a partial set behind.
  for (const [name] of entries) {
    if (name === "" || name === "." || name === ".." || path.basename(name) !== name) {
      throw new TypeError(`PEM file name must be a plain file name, got ${JSON.stringify(name)}`);
    }
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const written = {} as Record<Name, string>;
  for (const [name, pem] of entries) {
    const target = path.join(dir, name);
    await writeAtomically(target, pem, isPrivateKey(name, pem) ? PRIVATE_FILE_MODE : PUBLIC_FILE_MODE);
    written[name] = target;
  }
  return written;
}

// The content check backs up the naming convention: a key saved under an unexpected name must still
// not end up world-readable.
function isPrivateKey(name: string, pem: string): boolean {
  return name.endsWith("-key.pem") || name.endsWith(".key") || pem.includes("PRIVATE KEY-----");
}

async function writeAtomically(target: string, content: string, mode: number): Promise<void> {
  const temp = `${target}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    const handle = await open(temp, "wx", mode);
    try {
      await handle.writeFile(content);
    } finally {
      await handle.close();
    }
    await rename(temp, target);
  } catch (err) {
    await rm(temp, { force: true });
    throw err;
  }
}
