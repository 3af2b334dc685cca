/**
 * `kgw`'s dispatcher: a table of commands (services/kgw.ts) in, the right command run. It answers
 * what needs no command loaded: `kgw --help` (every command, with its subcommands), `kgw help
 * <command> [subcommand]` (the command's own --help), `kgw --version` / `kgw version`, and an
 * unknown command with the closest known one. A command is loaded only when it runs, so
 * `kgw agent` never loads server code and `kgw --version` loads none.
 */
import { didYouMean } from "../util/did-you-mean.js";
import { EXIT } from "./exit-codes.js";

export interface CommandEntry {
  summary: string;
  /** The command's subcommands, from its own table; loaded for `kgw --help` only. */
  subcommands?: () => Promise<readonly string[]>;
  load: () => Promise<{ main: (argv: string[], env: NodeJS.ProcessEnv) => Promise<number> }>;
}

export type CommandTable = Readonly<Record<string, CommandEntry>>;

export interface DispatchIo {
  out(text: string): void;
  err(text: string): void;
  /** kgw's version (lib/commands/version.ts). */
  version(): string;
}

/** What the dispatcher itself answers, listed in the help after the table's commands. */
const BUILT_IN: Readonly<Record<string, string>> = {
  help: "show the help of kgw, of a command (kgw help tenant) or a subcommand (kgw help tenant delete)",
  version: "print kgw's version (--json: with Node.js's)",
};

export async function dispatch(
  commands: CommandTable,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  io: DispatchIo,
): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined) {
    io.err(await usage(commands));
    return EXIT.USAGE;
  }
  if (name === "--help" || name === "-h") {
    io.out(await usage(commands));
    return EXIT.OK;
  }
  if (name === "--version" || name === "-v" || name === "version") return version(rest, io);
  if (name === "help") {
    const [topic, ...more] = rest;
    if (topic === undefined) {
      io.out(await usage(commands));
      return EXIT.OK;
    }
    const command = lookUp(commands, topic, io);
    if (!command) return EXIT.USAGE;
    return (await command.load()).main([...more, "--help"], env);
  }
  const command = lookUp(commands, name, io);
  if (!command) return EXIT.USAGE;
  return (await command.load()).main(rest, env);
}

function lookUp(commands: CommandTable, name: string, io: DispatchIo): CommandEntry | undefined {
  if (Object.hasOwn(commands, name)) return commands[name];
  const known = [...Object.keys(commands), ...Object.keys(BUILT_IN)];
  const what = name.startsWith("-") ? "flag" : "command";
  const hint = didYouMean(
    name.replace(/^-+/, ""),
    name.startsWith("-") ? ["help", "version"] : known,
    name.startsWith("-") ? "--" : "",
  );
  io.err(`kgw: unknown ${what} "${name.slice(0, 40)}"${hint}\nRun "kgw --help" for the commands.\n`);
  return undefined;
}

function version(args: readonly string[], io: DispatchIo): number {
  const json = args.length === 1 && (args[0] === "--json" || args[0] === "--output=json");
  if (args.length > 0 && !json) {
    io.err(`kgw version: takes only --json, not "${args[0]!.slice(0, 40)}"\n`);
    return EXIT.USAGE;
  }
  const v = io.version();
  io.out(json ? `${JSON.stringify({ version: v, node: process.version })}\n` : `kgw ${v}\n`);
  return EXIT.OK;
}

/** `kgw --help`: every command of the table and every subcommand, from their own tables. */
export async function usage(commands: CommandTable): Promise<string> {
  const width = Math.max(...[...Object.keys(commands), ...Object.keys(BUILT_IN)].map((n) => n.length)) + 2;
  const rows: string[] = [];
  for (const [name, c] of Object.entries(commands)) {
    rows.push(`  ${name.padEnd(width)} ${c.summary}`);
    const subs = c.subcommands ? await c.subcommands() : [];
    if (subs.length > 0) rows.push(`  ${"".padEnd(width)}   subcommands: ${subs.join(", ")}`);
  }
  for (const [name, summary] of Object.entries(BUILT_IN)) rows.push(`  ${name.padEnd(width)} ${summary}`);
  return [
    "Usage: kgw <command> [subcommand] [flags]",
    "",
    "Commands:",
    ...rows,
    "",
    'Run "kgw help <command>" or "kgw <command> --help" for a command\'s flags.',
    "Exit codes: 0 done, 1 failed, 2 usage, 3 not found, 4 already so, 5 not confirmed (docs/CONFIGURATION.md).",
    "",
  ].join("\n");
}
