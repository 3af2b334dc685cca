#!/usr/bin/env node
// Thin launcher for the bundled CLI, dist/bundle/ (scripts/bundle.mjs; npm runs `npm run build`
// on install via `prepare`).
import module from "node:module";

// Node's on-disk compile cache (Node ≥22.1; absent on older Node, then nothing happens): V8
// reuses the compiled code of the bundle instead of compiling it again, which
// shortens a restarted server's exec-to-listening (docs/PERFORMANCE.md, `startup`). The
// directory is NODE_COMPILE_CACHE's (the image sets it to a cache built in at build time, its
// root filesystem being read-only), else Node's default under the OS temporary directory. A
// cache that cannot be read or written is skipped by Node: it costs a start-up nothing.
// NODE_DISABLE_COMPILE_CACHE=1 turns it off. Enabled before the CLI is imported, so that the
// CLI itself is cached.
module.enableCompileCache?.();
// Stack traces name lib/ and services/ (the bundle's source maps), not chunk lines. It costs a
// start nothing: no map is read until a trace is formatted (strace: no .map opened by a start).
process.setSourceMapsEnabled(true);
const { run } = await import("../dist/bundle/kgw.js");

run(process.argv.slice(2), process.env).then(
  (code) => {
    process.exitCode = code;
    // Normally the process ends here on its own. If a handle is still open (a second signal
    // asked to stop at once), do not let it hold the process up.
    setTimeout(() => process.exit(code), 2000).unref();
  },
  (err) => {
    process.stderr.write(`kgw: ${err?.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  },
);
