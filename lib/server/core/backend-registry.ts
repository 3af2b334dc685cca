/**
 * The agents connected to this instance, by tenant. In single-tenant mode every agent is tenant
 * "default". In a fleet, the fleet's directory (lib/fleet/fleet-directory.ts, over the DynamoDB
 * registry) sits beside this one and answers the question this one cannot: which other instance
 * holds a tenant's agents.
 */
import { EventEmitter } from "node:events";
import { NoAgentError } from "../../errors.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import type { AgentSession } from "./agent-session.js";
import type { AgentDirectory, DialContext } from "./dial-context.js";
import type { AgentChooser } from "./proxy-strategies.js";

/**
 * "changed": a tenant's agents here changed (metrics); "added"/"removed": one agent stream came or
 * went (the fleet's ownership rows, lib/fleet/fleet.ts).
 */
type RegistryEvents = {
  changed: [tenant: string];
  added: [session: AgentSession];
  removed: [session: AgentSession];
};

/**
 * One tenant's agent streams, oldest first (a Set keeps insertion order and removes in O(1)), by
 * agent id too, and the array `agents()` hands out, rebuilt only when asked after a change: when
 * 10,000 agents of a tenant leave at once, each removal costs O(1), not a scan of those left.
 */
interface TenantAgents {
  readonly sessions: Set<AgentSession>;
  readonly byAgentId: Map<string, Set<AgentSession>>;
  snapshot: readonly AgentSession[] | null;
}

const NONE: readonly AgentSession[] = Object.freeze([]);
const EMPTY: ReadonlySet<AgentSession> = new Set();

export class BackendRegistry extends EventEmitter<RegistryEvents> implements AgentDirectory {
  private readonly byTenant = new Map<string, TenantAgents>();
  private total = 0;

  constructor(private readonly choose: AgentChooser) {
    super();
  }

  add(session: AgentSession): void {
    const { tenant, agentId } = session.info;
    let t = this.byTenant.get(tenant);
    if (!t) {
      t = { sessions: new Set(), byAgentId: new Map(), snapshot: null };
      this.byTenant.set(tenant, t);
    }
    t.sessions.add(session);
    let streams = t.byAgentId.get(agentId);
    if (!streams) {
      streams = new Set();
      t.byAgentId.set(agentId, streams);
    }
    streams.add(session);
    t.snapshot = null;
    this.total++;
    session.once("closed", () => this.remove(session));
    this.emit("added", session);
    this.emit("changed", tenant);
  }

  private remove(session: AgentSession): void {
    const { tenant, agentId } = session.info;
    const t = this.byTenant.get(tenant);
    if (!t?.sessions.delete(session)) return;
    const streams = t.byAgentId.get(agentId);
    streams?.delete(session);
    if (streams?.size === 0) t.byAgentId.delete(agentId);
    if (t.sessions.size === 0) this.byTenant.delete(tenant);
    t.snapshot = null;
    this.total--;
    this.emit("removed", session);
    this.emit("changed", tenant);
  }

  /** The agent streams of `tenant` here, oldest first. O(n) after a change, O(1) otherwise. */
  agents(tenant: string): readonly AgentSession[] {
    const t = this.byTenant.get(tenant);
    if (!t) return NONE;
    t.snapshot ??= [...t.sessions];
    return t.snapshot;
  }

  /** How many agent streams `tenant` has here, in O(1) (quotas, metrics). */
  count(tenant: string): number {
    return this.byTenant.get(tenant)?.sessions.size ?? 0;
  }

  /** The streams of one agent of `tenant` here, oldest first (duplicates, reconnects). */
  streamsOf(tenant: string, agentId: string): ReadonlySet<AgentSession> {
    return this.byTenant.get(tenant)?.byAgentId.get(agentId) ?? EMPTY;
  }

  /** Every connected agent session, all tenants. */
  *all(): Iterable<AgentSession> {
    for (const t of this.byTenant.values()) yield* t.sessions;
  }

  get size(): number {
    return this.total;
  }

  /** Agents answering their probes, all tenants: what readiness counts. */
  get responsiveCount(): number {
    let n = 0;
    for (const s of this.all()) if (s.responsive) n++;
    return n;
  }

  /**
   * Sends the dial to an agent of `tenant`; throws NoAgentError when there is none. Agents that
   * stopped answering (agent-liveness.ts) are never chosen: a prompt 503 beats a dial that waits
   * out its timeout on a frozen agent.
   */
  dial(ctx: DialContext, req: DialRequest, frontend: FrontendEnd): DialHandle {
    const tenant = ctx.caller.tenant;
    const connected = oldestPerAgent(this.agents(tenant));
    const answering = connected.every((a) => a.responsive)
      ? connected
      : connected.filter((a) => a.responsive);
    const agent = this.choose(answering, req);
    if (!agent) {
      const whose = tenant === "default" ? "this server" : tenant;
      throw new NoAgentError(
        answering.length === 0 && connected.length > 0
          ? `no agent of ${whose} is answering (${connected.length} connected, none responded in time)`
          : `no agent connected for ${whose}`,
      );
    }
    ctx.observer?.routed(agent.info.agentId);
    return agent.dial(req, frontend, ctx);
  }
}

/**
 * One session per agent id, the oldest: an agent short of servers keeps dialing the same address
 * and closes a new stream as soon as it sees a server ID it already has, so the newer streams of
 * an id are about to go and a dial sent on one would fail as "agent gone".
 */
function oldestPerAgent(sessions: readonly AgentSession[]): readonly AgentSession[] {
  if (sessions.length < 2) return sessions;
  const seen = new Set<string>();
  const out: AgentSession[] = [];
  for (const s of sessions) {
    if (seen.has(s.info.agentId)) continue;
    seen.add(s.info.agentId);
    out.push(s);
  }
  return out.length === sessions.length ? sessions : out;
}
