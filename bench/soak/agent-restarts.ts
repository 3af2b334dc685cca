/**
 * Agent restarts: every AGENT_RESTART_EVERY_MS one agent stops, the agents in turn, and a new
 * process with the same agent ID takes its place (a pod restarted in place). Each agent
 * alternates between a graceful stop (SIGTERM: it drains) and a crash (SIGKILL).
 */
import type { Child } from "../harness/procs.js";
import { type StackContext, startKgwAgent, type TunnelStack } from "../harness/stacks.js";
import { errorMessage, pause } from "../harness/util.js";
import { AGENT_DRAIN_GRACE_MS, AGENT_RESTART_EVERY_MS, AGENTS } from "./options.js";
import type { Tally } from "./tally.js";

export class Agents {
  private readonly children: Child[] = [];

  constructor(
    private readonly ctx: StackContext,
    private readonly stack: TunnelStack,
  ) {}

  static agentId(i: number): string {
    return `soak-${i + 1}`;
  }

  async startAll(): Promise<void> {
    for (let i = 0; i < AGENTS; i++) this.children[i] = await this.start(i);
  }

  private async start(i: number): Promise<Child> {
    return startKgwAgent(this.ctx, this.stack, { agentId: Agents.agentId(i) });
  }

  /** Restarts agent `i`, by a crash when `crash`, else gracefully. */
  async restart(i: number, crash: boolean): Promise<void> {
    const old = this.children[i]!;
    if (crash) await old.kill();
    else await old.stop(AGENT_DRAIN_GRACE_MS);
    this.children[i] = await this.start(i);
  }
}

export async function runAgentRestarts(
  agents: Agents,
  tally: Tally,
  log: (m: string) => void,
  signal: AbortSignal,
): Promise<void> {
  for (let n = 0; ; n++) {
    await pause(AGENT_RESTART_EVERY_MS, signal);
    if (signal.aborted) return;
    const i = n % AGENTS;
    // Each agent alternates, and the two are out of step (graceful, crash, crash, graceful, …),
    // so that even a two-minute run sees both kinds.
    const crash = (n + Math.floor(n / AGENTS)) % 2 === 1;
    tally.restarts.begin();
    try {
      await agents.restart(i, crash);
      tally.counts.agentRestarts++;
    } catch (err) {
      tally.counts.agentRestartsFailed++;
      tally.unexpected("agent restart", err, () => {});
      log(`agent ${Agents.agentId(i)} restart failed: ${errorMessage(err).split("\n")[0]}`);
    } finally {
      tally.restarts.end();
    }
  }
}
