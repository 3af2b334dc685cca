/**
 * `kgw pki`: parse the command once, make the certificates, exit with its code.
 */
import { parsePkiCommand } from "../../lib/commands/pki/parse-pki-command.js";
import { runPkiCommand } from "../../lib/commands/pki/run-pki-command.js";

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parsePkiCommand>;
  try {
    parsed = parsePkiCommand(argv, env);
  } catch (err) {
    process.stderr.write(`kgw pki: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(parsed.text);
    return 0;
  }
  return runPkiCommand(parsed.command, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
  });
}
