/**
 * The `kgw` command: dispatches to a subcommand's `main`. Each subcommand is loaded on demand so
 * `kgw agent` never loads server code and vice versa.
 */
const COMMANDS: Record<
  string,
  {
    summary: string;
    load: () => Promise<{ main: (argv: string[], env: NodeJS.ProcessEnv) => Promise<number> }>;
  }
> = {
  server: {
    summary: "run a gateway instance (konnectivity-server compatible)",
    load: () => import("./server/main.js"),
  },
  agent: {
    summary: "run the in-cluster agent (konnectivity-agent compatible)",
    load: () => import("./agent/main.js"),
  },
  tenant: {
    summary: "manage tenants and their credentials (create, list, show, rotate, revoke, delete, bundle)",
    load: () => import("./tenant/main.js"),
  },
  pki: {
    summary: "make the certificates of an AWS deployment (CA, serving, peer) and their secrets' JSON",
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

function usage(): string {
  const rows = Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(8)} ${c.summary}`);
  return `Usage: kgw <command> [flags]\n\nCommands:\n${rows.join("\n")}\n\nRun "kgw <command> --help" for the flags of a command.\n`;
}

export async function run(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    process.stdout.write(usage());
    return name === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (!command) {
    process.stderr.write(`kgw: unknown command "${name}"\n${usage()}`);
    return 2;
  }
  const { main } = await command.load();
  return main(rest, env);
}
