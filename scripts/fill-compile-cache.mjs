// Fills Node's compile cache (NODE_COMPILE_CACHE) with every file of the bundle (dist/bundle/,
// scripts/bundle.mjs: our modules and the packages they import), at image build time: the image's root filesystem is read-only at run time, so a
// cache the gateway could not write itself is built in instead (Dockerfile; bin/kgw.js reads it).
// Importing a file of the bundle starts nothing (each command's work begins in its main(), called
// by the CLI), so loading them all only compiles them.
//   NODE_COMPILE_CACHE=<dir> node scripts/fill-compile-cache.mjs <bundle dir>
import { readdirSync } from "node:fs";
import module from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const dist = path.resolve(process.argv[2] ?? "dist/bundle");
const status = module.enableCompileCache?.();
if (status === undefined || !process.env.NODE_COMPILE_CACHE) {
  process.stderr.write("fill-compile-cache: needs Node ≥22.1 and NODE_COMPILE_CACHE\n");
  process.exit(2);
}
const files = readdirSync(dist, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile() && e.name.endsWith(".js"))
  .map((e) => path.join(e.parentPath, e.name))
  .sort();
for (const file of files) await import(pathToFileURL(file).href);
module.flushCompileCache?.();
process.stdout.write(`fill-compile-cache: ${files.length} modules of ${dist}\n`);
