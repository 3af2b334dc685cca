/**
 * kgw's version: package.json's `version`, read from the file on request. It imports only
 * node:fs and node:path, so `kgw --version` loads nothing else (no command, no dependency).
 */
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const PACKAGE_NAME = "konnectivity-gateway";
/** lib/commands/ in the sources, dist/lib/commands/ or dist/bundle/chunks/ when built: package.json is 2 or 3 up. */
const MAX_LEVELS_UP = 4;

/** The version of the package this file belongs to, found by walking up from `from`. */
export function packageVersion(from: string = fileURLToPath(import.meta.url)): string {
  const file = path.join(packageRoot(from), "package.json");
  return (JSON.parse(readFileSync(file, "utf8")) as { version: string }).version;
}

/** The folder of this package's package.json (the checkout, or /opt/kgw in the image). */
export function packageRoot(from: string = fileURLToPath(import.meta.url)): string {
  let dir = path.dirname(from);
  for (let i = 0; i <= MAX_LEVELS_UP; i++) {
    const file = path.join(dir, "package.json");
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: unknown; version?: unknown };
      if (pkg.name === PACKAGE_NAME && typeof pkg.version === "string") return dir;
    }
    dir = path.dirname(dir);
  }
  throw new Error(`the package.json of ${PACKAGE_NAME} was not found above ${from}`);
}
