/**
 * The Prompter of a real terminal: the question on standard error (standard output may be piped
 * into jq), one line read from standard input. The entrypoints build it; commands receive it.
 */
import { createInterface } from "node:readline/promises";
import type { Prompter } from "./confirm.js";

export function terminalPrompter(
  input: NodeJS.ReadStream = process.stdin,
  output: NodeJS.WriteStream = process.stderr,
): Prompter {
  return {
    interactive: input.isTTY === true && output.isTTY === true,
    async ask(question) {
      const rl = createInterface({ input, output, terminal: true });
      // Ctrl-D ends the input: no answer, which declines.
      const closed = new Promise<undefined>((resolve) => rl.once("close", () => resolve(undefined)));
      try {
        return await Promise.race([rl.question(question), closed]);
      } finally {
        rl.close();
      }
    },
  };
}
