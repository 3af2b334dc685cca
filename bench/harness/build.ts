/**
 * The benchmark runs the gateway and agent as operators do, `node bin/kgw.js …`, which loads
 * the compiled dist/. Rebuild first when any source under lib/ or services/ is newer.
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import path from "node:path";
import { REPO_ROOT } from "./repo.js";

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (entry.name.endsWith(".ts") && !entry.name.endsWith(".test.ts"))
      newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

export function distIsFresh(): boolean {
  const entry = path.join(REPO_ROOT, "dist", "services", "kgw.js");
  if (!existsSync(entry)) return false;
  const sources = Math.max(
    newestSource(path.join(REPO_ROOT, "lib")),
    newestSource(path.join(REPO_ROOT, "services")),
  );
  // dist/ as a whole: tsc rewrites every file it emits, so the entry's time is the build's time.
  return statSync(entry).mtimeMs >= sources;
}

export function build(): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(
      "npm",
      ["run", "build"],
      { cwd: REPO_ROOT, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) =>
        err ? reject(new Error(`npm run build failed:\n${stdout}${stderr}`)) : resolve(),
    );
  });
}
