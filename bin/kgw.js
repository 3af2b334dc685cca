#!/usr/bin/env node
// Thin launcher for the compiled CLI (npm runs `npm run build` on install via `prepare`).
import { run } from "../dist/services/kgw.js";

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
