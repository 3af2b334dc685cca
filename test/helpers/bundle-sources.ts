/**
 * What the bundle (dist/bundle/, scripts/bundle.mjs) is made of: its metafile says which sources
 * (lib/…, services/…, node_modules/…) each file of it holds. A test that records which files a
 * process loads asks this which sources that loaded, to assert what stays lazy.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { REPO } from "./kgw-bin.js";

export const BUNDLE_DIR = path.join(REPO, "dist", "bundle");

interface Metafile {
  outputs: Record<string, { entryPoint?: string; inputs: Record<string, unknown> }>;
}

function metafile(): Metafile {
  return JSON.parse(readFileSync(path.join(BUNDLE_DIR, "meta.json"), "utf8")) as Metafile;
}

/** Normalises a metafile path (relative to the repository, or through node_modules' symlink). */
function sourcePath(input: string): string {
  const i = input.lastIndexOf("node_modules/");
  return i >= 0 ? input.slice(i) : path.relative(REPO, path.resolve(REPO, input));
}

/** The sources held by the bundle files among `urls` (file: URLs); other URLs are ignored. */
export function sourcesOf(urls: string[]): string[] {
  const outputs = metafile().outputs;
  const byFile = new Map(Object.entries(outputs).map(([out, o]) => [path.resolve(REPO, out), o]));
  const sources = new Set<string>();
  for (const url of urls) {
    if (!url.startsWith("file:")) continue;
    for (const input of Object.keys(byFile.get(fileURLToPath(url))?.inputs ?? {}))
      sources.add(sourcePath(input));
  }
  return [...sources].sort();
}

/** The file: URL of the bundle file that a dynamic import of `source` (e.g. lib/fleet/start-fleet.ts) loads. */
export function chunkOf(source: string): string {
  for (const [out, o] of Object.entries(metafile().outputs)) {
    if (o.entryPoint === source) return pathToFileURL(path.resolve(REPO, out)).href;
  }
  throw new Error(`the bundle has no chunk loaded on demand for ${source}`);
}
