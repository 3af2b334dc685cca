import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Integration tests start real listeners and child processes; give them room but keep
    // any single hang from eating the CI budget.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    allowOnly: false,
  },
});
