import { type AgentDeps, type RunningAgent, startAgent } from "../../lib/agent/agent.js";
import { parseAgentOptions } from "../../lib/config/agent-options.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { AGENT_TOKEN, captureLogger } from "./gateway.js";
import type { TestPki } from "./pki.js";

/**
 * Starts our real agent in-process against `agentPort`, authenticating with the test token,
 * with fast reconnects so restart scenarios finish quickly. `deps` injects e.g. a resolver.
 */
export async function startTestAgent(
  pki: TestPki,
  agentPort: number,
  flags: string[] = [],
  deps: Omit<Partial<AgentDeps>, "log" | "metrics"> = {},
): Promise<{ agent: RunningAgent; logs: string[] }> {
  const parsed = parseAgentOptions(
    [
      "--proxy-server-host=127.0.0.1",
      `--proxy-server-port=${agentPort}`,
      "--server-name=localhost",
      `--ca-cert=${pki.files.caCert}`,
      `--agent-token=${AGENT_TOKEN}`,
      "--health-server-host=127.0.0.1",
      "--health-server-port=0",
      "--admin-server-port=0",
      "--sync-interval=50ms",
      "--sync-interval-cap=200ms",
      "--probe-interval=100ms",
      ...flags,
    ],
    {},
  );
  if (parsed.help) throw new Error("unexpected help");
  const { log, lines } = captureLogger();
  const agent = await startAgent(parsed.options, { ...deps, log, metrics: new AgentMetrics() });
  return { agent, logs: lines };
}

export async function waitFor(
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
