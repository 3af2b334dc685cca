/**
 * The --ports-file announcement (lib/config/ports-file-flag.ts): one JSON object naming each
 * listener's bound port. A reader polls for the file and parses it whole: it is written to a
 * temporary name and renamed into place, so it never sees half of it, and it is removed before
 * the process binds anything, so a file left by an earlier run is never read as this one's.
 */
import { rename, rm, writeFile } from "node:fs/promises";
import { ConfigError } from "../errors.js";

export type AnnouncedPorts = Readonly<Record<string, number>>;

/** Removes a file left by an earlier run (or this one's, on a clean exit). */
export async function clearPortsFile(file: string): Promise<void> {
  try {
    await rm(file, { force: true });
  } catch (err) {
    throw new ConfigError(`--ports-file ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** Writes `ports` to `file` atomically (temporary file in the same directory, then rename). */
export async function writePortsFile(file: string, ports: AnnouncedPorts): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(temporary, `${JSON.stringify(ports)}\n`, { mode: 0o644 });
    await rename(temporary, file);
  } catch (err) {
    await rm(temporary, { force: true }).catch(() => {});
    throw new ConfigError(`--ports-file ${file}: ${(err as Error).message}`, { cause: err });
  }
}
