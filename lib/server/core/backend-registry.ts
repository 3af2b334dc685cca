/**
 * The agents connected to this instance, by tenant. In single-tenant mode every agent is tenant
 * "default". The fleet registry (DynamoDB) will sit beside this one and answer the question this
 * one cannot: which other instance holds a tenant's agents.
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

export class BackendRegistry extends EventEmitter<RegistryEvents> implements AgentDirectory {
  private readonly byTenant = new Map<string, AgentSession[]>();

  constructor(private readonly choose: AgentChooser) {
    super();
  }

  add(session: AgentSession): void {
    const tenant = session.info.tenant;
    const list = this.byTenant.get(tenant) ?? [];
    list.push(session);
    this.byTenant.set(tenant, list);
    session.once("closed", () => this.remove(session));
    this.emit("added", session);
    this.emit("changed", tenant);
  }

  private remove(session: AgentSession): void {
    const tenant = session.info.tenant;
    const list = this.byTenant.get(tenant);
    if (!list) return;
    const i = list.indexOf(session);
    if (i === -1) return;
    list.splice(i, 1);
    if (list.length === 0) this.byTenant.delete(tenant);
    this.emit("removed", session);
    this.emit("changed", tenant);
  }

  agents(tenant: string): readonly AgentSession[] {
    return this.byTenant.get(tenant) ?? [];
  }

  /** Every connected agent session, all tenants. */
  *all(): Iterable<AgentSession> {
    for (const list of this.byTenant.values()) yield* list;
  }

  get size(): number {
    let n = 0;
    for (const list of this.byTenant.values()) n += list.length;
    return n;
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
