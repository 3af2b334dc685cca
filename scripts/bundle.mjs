// Bundles the `kgw` command (services/kgw.ts) with esbuild into dist/bundle/: kgw.js and its
// chunks, every dependency inside, which bin/kgw.js and the image run. Node's ESM loader resolves,
// reads and links each module on its own: over our ~170 modules and the packages they import that
// was most of a server's start to listening (docs/PERFORMANCE.md, `startup`); a few chunks load in
// a fraction of it. Code splitting keeps what the CLI imports on demand (each command, the fleet
// and the AWS SDK, tenant mode, certificate code) in chunks of its own, loaded only when used, as
// before. Linked source maps (kgw.js.map beside each chunk) name lib/ and services/ in stack traces
// (bin/kgw.js turns them on). The tsc build (dist/lib, dist/services) stays: tests import it.
//   node scripts/bundle.mjs [out dir, default dist/bundle]
import { rmSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outdir = path.resolve(process.argv[2] ?? path.join(root, "dist", "bundle"));

// The packages are CommonJS (grpc-js, pino, prom-client, the AWS SDK): in an ES module they need a
// `require`, which esbuild's wrapper finds in scope. Every chunk gets its own (a banner each).
const REQUIRE_SHIM =
  'import { createRequire as __kgwCreateRequire } from "node:module"; const require = __kgwCreateRequire(import.meta.url);';

// Node's own modules, imported by our ES modules, are loaded with `require` instead. An ES import of
// a builtin builds its ES facade, which reads every export; on Node 24 `node:http`'s exports
// include getters (WebSocket, CloseEvent, MessageEvent) that load the whole of Node's undici:
// 37–58 ms of CPU in a bare process, against 3–6 ms for `require("node:http")` (Node 20 has no
// such getters); in a server's start about 6 ms, much of what undici needs being loaded anyway,
// and no server loads undici now. A builtin is the same object either way; only the facade is
// skipped.
const BUILTIN = new RegExp(`^(node:.+|${builtinModules.map((m) => m.replace(/[/]/g, "\\/")).join("|")})$`);
/** @type {import("esbuild").Plugin} */
const builtinsByRequire = {
  name: "builtins-by-require",
  setup(b) {
    b.onResolve({ filter: BUILTIN }, (args) =>
      args.kind === "import-statement" || args.kind === "dynamic-import"
        ? { path: args.path, namespace: "builtin" }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "builtin" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

rmSync(outdir, { recursive: true, force: true });
const result = await build({
  absWorkingDir: root,
  entryPoints: ["services/kgw.ts"],
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  // The oldest Node the tests run on (the product needs 24): nothing is lowered for either.
  target: "node20",
  chunkNames: "chunks/[name]-[hash]",
  // A package's ES build before its CommonJS one: esbuild drops what an ES module exports and no
  // one imports, so of @aws-sdk/client-dynamodb only the commands we send are kept (its CommonJS
  // build is one module holding all of them). Loading the fleet's chunk, the AWS SDK with it, took
  // 45 ms of CPU with the CommonJS builds and 19 with the ES ones (Node 24, p50 of 8, loaded machine).
  mainFields: ["module", "main"],
  sourcemap: "linked",
  // The maps point at lib/ and services/ without holding them: the image ships no sources, and
  // a trace that names file:line is what an operator sends us.
  sourcesContent: false,
  banner: { js: REQUIRE_SHIM },
  logLevel: "warning",
  metafile: true,
  plugins: [builtinsByRequire],
});
// Which chunk holds which module, for checking what a start-up loads (test/integration/
// startup-modules.test.ts) and for `esbuild --analyze`-style questions.
writeFileSync(path.join(outdir, "meta.json"), JSON.stringify(result.metafile));
const chunks = Object.keys(result.metafile.outputs).filter((f) => f.endsWith(".js")).length;
process.stdout.write(`bundle: ${chunks} files in ${path.relative(root, outdir)}\n`);
