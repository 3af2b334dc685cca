/**
 * `kgw demo`: parse the command once, run the quick start, stop on SIGINT/SIGTERM. The signals are
 * listened for from the start, so that one arriving while the demo starts still ends in a clean
 * stop (its temporary directory removed); a second one exits at once, and run-demo's exit hook
 * still removes the directory.
 */
import { parseDemoCommand } from "../../lib/commands/demo/parse-demo-command.js";
import { runDemo } from "../../lib/commands/demo/run-demo.js";

/** 128 + SIGINT, what a shell reports for a process Ctrl-C ended. */
const EXIT_SECOND_SIGNAL = 130;

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
  let signals = 0;
  const stopped = new Promise<void>((resolve) => {
    const onSignal = () => {
      signals++;
      if (signals === 1) resolve();
      else process.exit(EXIT_SECOND_SIGNAL);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
  return runDemo(parsed.command, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    untilStopped: () => stopped,
  });
}
