/**
 * `kgw demo`: parse the command once, run the quick start, stop on SIGINT/SIGTERM.
 */
import { parseDemoCommand } from "../../lib/commands/demo/parse-demo-command.js";
import { runDemo } from "../../lib/commands/demo/run-demo.js";

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parseDemoCommand>;
  try {
    parsed = parseDemoCommand(argv, env);
  } catch (err) {
    process.stderr.write(`kgw demo: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(parsed.text);
    return 0;
  }
  return runDemo(parsed.command, {
    out: (text) => process.stdout.write(text),
    untilStopped: () =>
      new Promise<void>((resolve) => {
        process.once("SIGINT", resolve);
        process.once("SIGTERM", resolve);
      }),
  });
}
