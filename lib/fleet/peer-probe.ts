/**
 * Where a tenant's agents are when the registry cannot say: ask the live peers over the peer
 * links (peer-agents-call.ts). Used by routing when a registry read fails or the registry is
 * known to be unreachable, so that an agent that re-homed during an outage (its new row queued,
 * unwritten) is still found from every instance, not only the one it joined; and before a dial
 * is answered "no agent" (routed-dial.ts), so that an agent that just connected is found before
 * the instance it joined has written its row (rows are written in the background).
 *
 * Bounded: the peers asked are the live instances of the last lease read (not this one, not one
 * whose link is failing), at most ROUTE_PROBE_MAX_IN_FLIGHT at a time, each within
 * ROUTE_PROBE_TIMEOUT_MS. One probe per tenant at a time however many dials wait on it; its answer
 * is kept ROUTE_PROBE_FRESH_MS ("nobody": ROUTE_PROBE_NEGATIVE_FRESH_MS). The first peer that
 * holds agents answers the dials waiting; later ones are added to what is kept.
 */
import { type BudgetedLog, budgetedInfo } from "../observability/log-budget.js";
import type { Logger } from "../observability/logger.js";
import { isLeaseLive } from "../registry/liveness.js";
import {
  ROUTE_PROBE_FRESH_MS,
  ROUTE_PROBE_MAX_IN_FLIGHT,
  ROUTE_PROBE_NEGATIVE_FRESH_MS,
  ROUTE_PROBE_TIMEOUT_MS,
} from "../server/durations.js";
import type { InstanceView } from "./instance-view.js";
import type { ProbeReason } from "./peer/peer-agents-call.js";
import type { PeerLinks } from "./peer/peer-links.js";

/** Probe results logged at info per second (the rest at debug; every peer asked is counted). */
const PROBE_LOG_LINES_PER_SECOND = 5;

export interface PeerProbeOptions {
  selfId: string;
  instances: Pick<InstanceView, "all" | "judgeAt" | "peer">;
  links: Pick<PeerLinks, "askAgents" | "isHealthy">;
  log: Logger;
  clock?: () => number;
  timeoutMs?: number;
  freshMs?: number;
  negativeFreshMs?: number;
  maxInFlight?: number;
}

const PROBE_REASONS: Record<ProbeReason, string> = {
  registry_unreadable: "the registry cannot be read",
  no_live_owner: "no owner the registry names took the dial (an agent's row may not be written yet)",
};

interface Answer {
  owners: string[];
  at: number;
}

export class PeerProbe {
  private readonly answers = new Map<string, Answer>();
  private readonly asking = new Map<string, Promise<readonly string[]>>();
  private readonly clock: () => number;
  private lastSweep: number;
  /** One line per probe, within a budget: an outage probes for every tenant being dialed. */
  private readonly logged: BudgetedLog;

  constructor(private readonly opts: PeerProbeOptions) {
    this.clock = opts.clock ?? Date.now;
    this.lastSweep = this.clock();
    this.logged = budgetedInfo(opts.log, PROBE_LOG_LINES_PER_SECOND, this.clock);
  }

  /**
   * The peers holding `tenant`'s agents, as they said recently or say now. Never rejects.
   * A kept answer naming owners is used only if it names one the dial has not tried (`tried`:
   * they said "not here" or were unavailable): otherwise the agents moved since the peers were
   * asked, and they are asked again. Asked because no owner took a dial (`no_live_owner`), it
   * is used only while as fresh as a "nobody" besides.
   */
  find(
    tenant: string,
    why: ProbeReason = "registry_unreadable",
    tried: ReadonlySet<string> = new Set(),
  ): Promise<readonly string[]> {
    const now = this.clock();
    this.sweep(now);
    const known = this.answers.get(tenant);
    if (known) {
      const negativeFresh = this.opts.negativeFreshMs ?? ROUTE_PROBE_NEGATIVE_FRESH_MS;
      const owners = known.owners.length > 0;
      const fresh =
        owners && why === "registry_unreadable" ? (this.opts.freshMs ?? ROUTE_PROBE_FRESH_MS) : negativeFresh;
      const contradicted = owners && known.owners.every((id) => tried.has(id));
      if (now - known.at <= fresh && !contradicted) return Promise.resolve(known.owners);
    }
    let pending = this.asking.get(tenant);
    if (!pending) {
      pending = this.ask(tenant, why).finally(() => this.asking.delete(tenant));
      this.asking.set(tenant, pending);
    }
    return pending;
  }

  /** Answers kept now (for tests and metrics). */
  get size(): number {
    return this.answers.size;
  }

  private ask(tenant: string, why: ProbeReason): Promise<readonly string[]> {
    const { instances, links, selfId } = this.opts;
    const at = instances.judgeAt();
    const peers = [...instances.all().values()]
      .filter((l) => l.instanceId !== selfId && isLeaseLive(l, at))
      .map((l) => instances.peer(l.instanceId))
      .filter((p) => p !== undefined && links.isHealthy(p));
    const timeoutMs = this.opts.timeoutMs ?? ROUTE_PROBE_TIMEOUT_MS;
    const limit = Math.max(1, this.opts.maxInFlight ?? ROUTE_PROBE_MAX_IN_FLIGHT);
    const answer: Answer = { owners: [], at: this.clock() };
    const unanswered: string[] = [];
    return new Promise((resolve) => {
      let next = 0;
      let inFlight = 0;
      let told = false;
      const tell = () => {
        if (told) return;
        told = true;
        answer.at = this.clock();
        this.answers.set(tenant, answer);
        resolve(answer.owners);
      };
      const launch = () => {
        while (inFlight < limit && next < peers.length) {
          const peer = peers[next++]!;
          inFlight++;
          void links.askAgents(peer, tenant, timeoutMs, why).then((a) => {
            inFlight--;
            if (typeof a !== "string" && a.agents > 0) {
              answer.owners.push(peer.id);
              tell(); // the dials waiting go on; later answers join what is kept
            } else if (typeof a === "string") unanswered.push(`${peer.id}: ${a}`);
            if (inFlight === 0 && next >= peers.length) done();
            else launch();
          });
        }
      };
      const done = () => {
        this.logged(
          { tenant, why, asked: peers.length, found: answer.owners, unanswered },
          `${PROBE_REASONS[why]}: asked the live peers for the tenant's agents`,
        );
        tell();
      };
      if (peers.length === 0) done();
      else launch();
    });
  }

  /** Forgets answers too old to use (at most once per fresh interval, on a lookup). */
  private sweep(now: number): void {
    const fresh = this.opts.freshMs ?? ROUTE_PROBE_FRESH_MS;
    if (now - this.lastSweep < fresh) return;
    this.lastSweep = now;
    for (const [tenant, a] of this.answers) if (now - a.at > fresh) this.answers.delete(tenant);
  }
}
