/**
 * The `kgw` command: a table of commands, each loaded on demand so `kgw agent` never loads
 * server code and vice versa; lib/commands/dispatch.ts does the rest (help, version, unknown
 * commands). A new command is one entry here (CONTRIBUTING.md, "Where a new piece goes").
 */
import { type CommandTable, dispatch } from "../lib/commands/dispatch.js";
import { packageVersion } from "../lib/commands/version.js";

export const COMMANDS: CommandTable = {
  server: {
    summary: "run a gateway instance (konnectivity-server compatible)",
    load: () => import("./server/main.js"),
  },
  agent: {
    summary: "run the in-cluster agent (konnectivity-agent compatible)",
    load: () => import("./agent/main.js"),
  },
  tenant: {
    summary: "manage tenants and their credentials in a tenant store",
    subcommands: async () =>
      (await import("../lib/commands/tenant/parse-tenant-command.js")).TENANT_SUBCOMMANDS,
    load: () => import("./tenant/main.js"),
  },
  pki: {
    summary: "make the certificates of an AWS deployment (CA, serving, peer) and their secrets' JSON",
    subcommands: async () => (await import("../lib/commands/pki/parse-pki-command.js")).PKI_SUBCOMMANDS,
    load: () => import("./pki/main.js"),
  },
  status: {
    summary: "show the fleet, its tenants and their agents (any instance's admin port)",
    load: () => import("./status/main.js"),
  },
  demo: {
    summary: "start a local server, agent and backend, and send a request through the tunnel",
    load: () => import("./demo/main.js"),
  },
};

export function run(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return dispatch(COMMANDS, argv, env, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    version: () => packageVersion(),
  });
}
