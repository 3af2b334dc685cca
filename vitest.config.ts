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

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: [
      ...configDefaults.exclude,
      ...(hasGo ? [] : ["test/interop/**"]),
      ...(kubeMissing.length === 0 ? [] : ["test/kube/**"]),
    ],
    // Integration tests start real listeners and child processes; give them room but keep
    // any single hang from eating the CI budget.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    allowOnly: false,
  },
});
