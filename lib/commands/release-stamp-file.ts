/**
 * The release stamp of the package this file belongs to: release.json beside its package.json,
 * if the operator put the release's there (docs/DEPLOY.md, "Images"). Read by the entrypoints
 * of the commands that render agent manifests (`kgw tenant manifest`, `kgw server`'s install
 * route) only when they need the default image, so that a stale file never stops anything else.
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ConfigError } from "../errors.js";
import {
  defaultKgwAgentImage,
  parseReleaseStamp,
  RELEASE_STAMP_FILE,
} from "../tenancy/manifest/release-stamp.js";
import { packageRoot } from "./version.js";

/**
 * The kgw agent image a manifest names when no image is given: by digest with this package's
 * release.json, by this version's tag without. A file that is not this version's stamp is a
 * ConfigError naming the file.
 */
export function packageDefaultAgentImage(from: string = fileURLToPath(import.meta.url)): string {
  const file = path.join(packageRoot(from), RELEASE_STAMP_FILE);
  if (!existsSync(file)) return defaultKgwAgentImage(null);
  try {
    return defaultKgwAgentImage(parseReleaseStamp(readFileSync(file, "utf8")));
  } catch (err) {
    throw new ConfigError(`${file}: ${(err as Error).message}`, { cause: err });
  }
}
