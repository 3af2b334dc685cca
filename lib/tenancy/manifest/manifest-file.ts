/**
 * Reading the CA bundle for, and writing, `kgw tenant manifest`'s files. The CA is read and
 * checked before a token is minted, so a wrong path costs nothing; the manifest holds a token, so
 * it is written 0600, to a temporary file renamed into place (never a readable half-written file,
 * never an existing, more permissive file briefly holding the token).
 */
import { readFile, stat } from "node:fs/promises";
import path from "node:path";
import { ConfigError } from "../../errors.js";
import { writeFileAtomically } from "../file-store/atomic-write.js";
import { MAX_CA_BUNDLE_BYTES } from "./input.js";

export async function readManifestCaBundle(file: string, flag: string): Promise<string> {
  try {
    if ((await stat(file)).size > MAX_CA_BUNDLE_BYTES) {
      throw new ConfigError(
        `${flag}: ${file} is larger than a CA bundle (${MAX_CA_BUNDLE_BYTES / 1024} KiB)`,
      );
    }
    return await readFile(file, "utf8");
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`${flag}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? err}`);
  }
}

/** Writes `yaml` to `file` with mode 0600. The directory must exist (as for any output file). */
export async function writeManifestFile(file: string, yaml: string): Promise<string> {
  const target = path.resolve(file);
  await writeFileAtomically(path.dirname(target), target, yaml);
  return target;
}
