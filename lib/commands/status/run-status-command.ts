/**
 * `kgw status`: asks an admin address for the status API's answer and prints it (tables, or the
 * JSON as it came), once or every --interval until stopped. Exit codes: 0 when the address
 * answered (a fleet with a dead instance is still an answer: the table says which); 1 when it did
 * not, with a message naming the address.
 */
import { GatewayError } from "../../errors.js";
import type { FleetStatus, TenantStatus } from "../../server/status/status-model.js";
import { fetchStatus } from "./fetch-status.js";
import type { StatusCommand } from "./parse-status-command.js";
import { renderFleet, renderTenant } from "./render-status.js";

export interface StatusIo {
  out(text: string): void;
  err(text: string): void;
  /** Resolves when the user asks to stop (SIGINT); --watch ends then. */
  stopped: Promise<void>;
  /** Clears the terminal between refreshes (a no-op when output is not a terminal). */
  clear(): void;
}

async function once(cmd: StatusCommand): Promise<string> {
  const body = await fetchStatus(cmd.adminUrl, cmd.tenant, cmd.timeoutMs);
  if (cmd.json) return `${JSON.stringify(body, null, 2)}\n`;
  return cmd.tenant === null ? renderFleet(body as FleetStatus) : renderTenant(body as TenantStatus);
}

export async function runStatusCommand(cmd: StatusCommand, io: StatusIo): Promise<number> {
  let stop = false;
  let wake: () => void = () => {};
  void io.stopped.then(() => {
    stop = true;
    wake();
  });
  for (;;) {
    let code = 0;
    try {
      const text = await once(cmd);
      if (cmd.watch && !cmd.json) io.clear();
      io.out(text);
    } catch (err) {
      io.err(`kgw status: ${err instanceof GatewayError ? err.message : String(err)}\n`);
      code = 1;
    }
    // Without --watch, one answer is the whole command; with it, a failed refresh is shown and
    // the next one tried (an instance restarting answers again).
    if (!cmd.watch || stop) return cmd.watch ? 0 : code;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, cmd.intervalMs);
      wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    if (stop) return 0;
  }
}
