#!/usr/bin/env node
// Thin launcher for the compiled CLI (npm runs `npm run build` on install via `prepare`).
import { run } from "../dist/services/kgw.js";

run(process.argv.slice(2), process.env).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`kgw: ${err && err.stack ? err.stack : err}\n`);
    process.exitCode = 1;
  },
);
