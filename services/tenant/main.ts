/**
 * `kgw tenant`: parse the command once, run it against the tenant store, exit with its code.
 */
import { EXIT } from "../../lib/commands/exit-codes.js";
import { packageDefaultAgentImage } from "../../lib/commands/release-stamp-file.js";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import { terminalPrompter } from "../../lib/commands/terminal-prompt.js";

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parseTenantCommand>;
  try {
    parsed = parseTenantCommand(argv, env);
    // The default kgw image is this release's by digest when the checkout holds its stamp.
    const manifest = !parsed.help && parsed.command.name === "manifest" ? parsed.command.manifest : null;
    if (manifest?.flavor === "kgw") manifest.image ??= packageDefaultAgentImage();
  } catch (err) {
    process.stderr.write(`kgw tenant: ${(err as Error).message}\n`);
    return EXIT.USAGE;
  }
  if (parsed.help) {
    process.stdout.write(parsed.text);
    return 0;
  }
  return runTenantCommand(parsed.command, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    prompter: terminalPrompter(),
  });
}
