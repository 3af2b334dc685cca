/**
 * `kgw status`: parse the command once, ask the admin address, print; with --watch, until
 * SIGINT or SIGTERM.
 */
import { parseStatusCommand } from "../../lib/commands/status/parse-status-command.js";
import { runStatusCommand } from "../../lib/commands/status/run-status-command.js";

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parseStatusCommand>;
  try {
    parsed = parseStatusCommand(argv, env);
  } catch (err) {
    process.stderr.write(`kgw status: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(parsed.text);
    return 0;
  }
  return runStatusCommand(parsed.command, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    // Only --watch waits for Ctrl-C; a single answer leaves the signals their default (exit).
    stopped: parsed.command.watch
      ? new Promise<void>((resolve) => {
          process.once("SIGINT", () => resolve());
          process.once("SIGTERM", () => resolve());
        })
      : new Promise<void>(() => {}),
    // ANSI: cursor home, clear screen; only on a terminal, so piped output stays plain.
    clear: () => {
      if (process.stdout.isTTY) process.stdout.write("\u001b[H\u001b[2J");
    },
  });
}
