import { spawnSync } from "node:child_process";
import { configDefaults, defineConfig } from "vitest/config";

const runs = (cmd: string, ...args: string[]) => spawnSync(cmd, args, { stdio: "ignore" }).status === 0;

// The interop suite (test/interop) builds upstream's Go code, so it runs only where `go` is on the
// PATH; elsewhere it is left out of the run, and we say so in one line.
const hasGo = runs("go", "version");
if (!hasGo) {
  console.log(
    "interop suite skipped: `go` is not on the PATH (test/interop needs Go to build upstream's client, agent and server)",
  );
}

// The kube-apiserver suite (test/kube) builds kube-apiserver with Go, runs etcd, and puts every
// process in a network namespace of its own, which takes root and iproute2 (`ip netns`, `ss`).
const kubeMissing = [
  ...(hasGo ? [] : ["`go`"]),
  ...(process.getuid?.() === 0 ? [] : ["root"]),
  ...(runs("ip", "-V") && runs("ss", "-V") ? [] : ["`ip` and `ss` (iproute2)"]),
  ...(runs("etcd", "--version") ? [] : ["`etcd` (apt-get install etcd-server)"]),
];
// Root in a container may still lack the right to create a network namespace: try one.
if (kubeMissing.length === 0 && !runs("unshare", "-n", "true")) {
  kubeMissing.push("permission to create a network namespace");
}
if (kubeMissing.length > 0) {
  console.log(`kube-apiserver suite skipped: test/kube needs ${kubeMissing.join(", ")}`);
}

// Three tiers, run one after another by `npm test` (scripts/test-tiers.mjs prints each one's time):
// - unit: no sockets to speak of, no child processes that take long; seconds.
// - integration: real listeners, agents and clients on loopback, in-process or as one child.
// - system: whole fleets of real processes, kills and outages, upstream's Go code, a real
//   kube-apiserver, the benchmark's smoke run; minutes.
// `npm run test:fast` runs the first two for the edit loop.
const skipped = [
  ...(hasGo ? [] : ["test/interop/**"]),
  ...(kubeMissing.length === 0 ? [] : ["test/kube/**"]),
];

export default defineConfig({
  test: {
    // Integration tests start real listeners and child processes; give them room but keep
    // any single hang from eating the CI budget.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    allowOnly: false,
    projects: [
      { extends: true, test: { name: "unit", include: ["test/unit/**/*.test.ts", "test/cdk/**/*.test.ts"] } },
      { extends: true, test: { name: "integration", include: ["test/integration/**/*.test.ts"] } },
      {
        extends: true,
        test: {
          name: "system",
          include: ["test/system/**/*.test.ts", "test/interop/**/*.test.ts", "test/kube/**/*.test.ts"],
          exclude: [...configDefaults.exclude, ...skipped],
        },
      },
    ],
  },
});
