/**
 * `kgw agent`: parse options once, start the agent, and shut down like upstream proxy-agent:
 * the first SIGTERM/SIGINT drains (DRAIN to every server, open connections may finish within
 * --drain-timeout), a second one stops at once.
 */

import { startAgent } from "../../lib/agent/agent.js";
import { agentHelp, parseAgentOptions } from "../../lib/config/agent-options.js";
import { ConfigError } from "../../lib/errors.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { createLogger } from "../../lib/observability/logger.js";
import { clearPortsFile, writePortsFile } from "../../lib/observability/ports-file.js";
import { dialScavenger } from "../../lib/transport/dial-scavenger.js";
import { checkNodeInternals } from "../../lib/transport/node-internals.js";

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let parsed: ReturnType<typeof parseAgentOptions>;
  try {
    parsed = parseAgentOptions(argv, env);
  } catch (err) {
    process.stderr.write(`kgw agent: ${(err as Error).message}\n`);
    return 2;
  }
  if (parsed.help) {
    process.stdout.write(agentHelp());
    return 0;
  }
  const log = createLogger({ name: "kgw-agent", level: parsed.options.logLevel });
  let agent: Awaited<ReturnType<typeof startAgent>>;
  const portsFile = parsed.options.portsFile;
  try {
    checkNodeInternals();
    if (portsFile) await clearPortsFile(portsFile);
    agent = await startAgent(parsed.options, {
      log,
      metrics: new AgentMetrics(),
      dialReceived: dialScavenger().look,
    });
  } catch (err) {
    process.stderr.write(`kgw agent: ${(err as Error).message}\n`);
    return err instanceof ConfigError ? 2 : 1;
  }
  if (portsFile) {
    const ports = { health: agent.healthAddress.port, admin: agent.adminAddress.port };
    try {
      await writePortsFile(portsFile, ports);
    } catch (err) {
      await agent.stop();
      process.stderr.write(`kgw agent: ${(err as Error).message}\n`);
      return 1;
    }
  }
  return new Promise((resolve) => {
    let signals = 0;
    const finish = (code: number) => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      if (!portsFile) return resolve(code);
      void clearPortsFile(portsFile)
        .catch(() => {})
        .then(() => resolve(code));
    };
    const onSignal = (signal: NodeJS.Signals) => {
      if (++signals > 1) {
        log.warn({ signal }, "second signal: stopping now");
        void agent.stop();
        finish(1);
        return;
      }
      log.info({ signal }, "signal received: draining");
      void agent
        .drain()
        .then(() => agent.stop())
        .then(() => finish(0));
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}
