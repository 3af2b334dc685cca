import { spawnSync } from "node:child_process";
import { configDefaults, defineConfig } from "vitest/config";

// The interop suite (test/interop) builds upstream's Go code, so it runs only where `go` is on
// the PATH; elsewhere it is left out of the run, and we say so in one line.
const hasGo = spawnSync("go", ["version"], { stdio: "ignore" }).status === 0;
if (!hasGo) {
  console.log(
    "interop suite skipped: `go` is not on the PATH (test/interop needs Go to build upstream's client, agent and server)",
  );
}

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: hasGo ? configDefaults.exclude : [...configDefaults.exclude, "test/interop/**"],
    // Integration tests start real listeners and child processes; give them room but keep
    // any single hang from eating the CI budget.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    allowOnly: false,
  },
});
