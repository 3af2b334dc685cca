/**
 * Preloaded into the soak's kgw processes (NODE_OPTIONS=--import=<this file>): on SIGUSR2 the
 * process writes its process.memoryUsage() to $KGW_SOAK_PROBE_DIR/<pid>.json. The server's
 * /metrics carries no Node runtime metrics, and the soak must not change the server to read its
 * heap. Nothing runs until the signal comes; the file is replaced whole (rename), never half
 * written.
 */
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const dir = process.env.KGW_SOAK_PROBE_DIR;
if (dir) {
  let seq = 0;
  process.on("SIGUSR2", () => {
    const file = join(dir, `${process.pid}.json`);
    writeFileSync(`${file}.tmp`, JSON.stringify({ seq: ++seq, ...process.memoryUsage() }));
    renameSync(`${file}.tmp`, file);
  });
}
