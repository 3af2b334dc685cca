/**
 * This instance as a member of a fleet: its lease, the ownership rows of the agents connected
 * here, the sweeper of dead instances' rows, its view of the other instances, and the routing
 * of dials to them over peer links. The gateway sees it as its FleetMembership
 * (lib/server/routing.ts; services/server/main.ts wires it): a directory for its dials, the peer
 * port's listener, the serverCount to tell agents, readiness, and drain.
 *
 * Nothing here blocks a dial or an agent on the registry, and nothing drops a live tunnel
 * because the registry is unreachable: writes queue (OwnershipWriter), reads keep the last view
 * (InstanceView, OwnerCache), and the degraded state shows in metrics and /readyz?verbose.
 */
import type { FleetMetrics } from "../metrics/fleet-metrics.js";
import type { Logger } from "../observability/logger.js";
import type { FleetRegistry } from "../registry/fleet-registry.js";
import { LeaseKeeper, readyOnLease } from "../registry/lease-keeper.js";
import type { OwnerRow } from "../registry/model.js";
import { OwnershipWriter } from "../registry/ownership-writer.js";
import { Sweeper } from "../registry/sweeper.js";
import type { AgentSession } from "../server/core/agent-session.js";
import type { BackendRegistry } from "../server/core/backend-registry.js";
import type { AgentDirectory } from "../server/core/dial-context.js";
import { ROUTE_READ_TIMEOUT_MS } from "../server/durations.js";
import type { FleetMembership } from "../server/routing.js";
import type { InstanceAnswer } from "../server/status/fleet-status.js";
import type { InstanceSlice } from "../server/status/status-model.js";
import { FleetDirectory } from "./fleet-directory.js";
import { FleetStatusSource } from "./fleet-status-source.js";
import { InstanceView } from "./instance-view.js";
import { reportKeepers } from "./keeper-reports.js";
import { OwnerCache } from "./owner-cache.js";
import { PeerLinks, type PeerTlsMaterial } from "./peer/peer-links.js";
import { buildPeerListener } from "./peer/peer-listener.js";
import { PeerProbe } from "./peer-probe.js";
import { RegistryHealth } from "./registry-health.js";

export interface FleetOptions {
  registry: FleetRegistry;
  instanceId: string;
  /** host:port the other instances dial for peer links (this instance's --peer-port). */
  peerAddress: string;
  heartbeatMs: number;
  leaseMs: number;
  /** Instances each agent should hold streams to (serverCount), capped by the instances alive. */
  agentRedundancy: number;
  /** --backend-dial-timeout: a dial forwarded over a peer link waits for the owner's answer by it. */
  backendDialTimeoutMs: number;
  peerTls: PeerTlsMaterial;
  log: Logger;
  metrics: FleetMetrics;
  clock?: () => number;
}

/** What /readyz?verbose shows of the fleet. */
export interface FleetState {
  readonly instanceId: string;
  readonly leaseHeld: boolean;
  readonly draining: boolean;
  readonly liveInstances: number;
  readonly registry: {
    readonly lastError: string | null;
    readonly consecutiveFailures: number;
    /** How long the heartbeat in flight has waited for the registry (ms); null when none is. */
    readonly heartbeatOutstandingMs: number | null;
    readonly pendingClaims: number;
    readonly pendingReleases: number;
  };
}

export class Fleet implements FleetMembership {
  private readonly keeper: LeaseKeeper;
  private readonly writer: OwnershipWriter;
  private readonly sweeper: Sweeper;
  readonly instances: InstanceView;
  readonly owners: OwnerCache;
  readonly links: PeerLinks;
  private readonly probe: PeerProbe;
  private readonly statusSource: FleetStatusSource;
  private readonly registryHealth: RegistryHealth;
  private readonly rows = new Map<AgentSession, OwnerRow>();
  private readonly log: Logger;
  private draining = false;
  private stopping: Promise<void> | undefined;
  private readonly serverCountListeners = new Set<(count: number) => void>();
  private lastServerCount = 0;

  private constructor(private readonly opts: FleetOptions) {
    const { registry, instanceId, metrics } = opts;
    const clock = opts.clock ?? Date.now;
    this.log = opts.log.child({ component: "fleet" });
    this.keeper = new LeaseKeeper({
      registry,
      instanceId,
      peerAddress: opts.peerAddress,
      heartbeatMs: opts.heartbeatMs,
      leaseMs: opts.leaseMs,
      agents: () => this.rows.size,
      clock,
    });
    this.writer = new OwnershipWriter({
      registry,
      instanceId,
      incarnation: this.keeper.state().incarnation,
      clock,
    });
    this.sweeper = new Sweeper({ registry, instanceId, intervalMs: opts.leaseMs, clock });
    this.instances = new InstanceView({
      registry,
      refreshMs: opts.heartbeatMs,
      recoveryGraceMs: opts.leaseMs,
      log: this.log,
      clock,
      failed: () => metrics.registryErrors.inc({ call: "listInstances" }),
      read: () => {
        this.serverCountMayHaveChanged();
        this.pruneLinks();
        this.statusSource.remember();
      },
    });
    this.owners = new OwnerCache({
      registry,
      instances: this.instances,
      selfId: instanceId,
      clock,
      read: (why) => metrics.routeReads.inc({ reason: why }),
      failed: () => metrics.registryErrors.inc({ call: "ownersOf" }),
    });
    this.links = new PeerLinks({
      instanceId,
      tls: opts.peerTls,
      log: opts.log,
      metrics: metrics.server,
      backendDialTimeoutMs: opts.backendDialTimeoutMs,
    });

    this.statusSource = new FleetStatusSource({
      selfId: instanceId,
      instances: this.instances,
      links: this.links,
      clock,
    });
    this.registryHealth = new RegistryHealth({ leaseReadsFailing: () => this.instances.readsFailing, clock });
    this.probe = new PeerProbe({
      selfId: instanceId,
      instances: this.instances,
      links: this.links,
      log: this.log,
      clock,
    });

    // A heartbeat after an outage longer than the lease: the sweeper may have removed our rows.
    this.keeper.on("acquired", () => this.writer.resync());
    reportKeepers({
      keeper: this.keeper,
      writer: this.writer,
      sweeper: this.sweeper,
      log: this.log,
      metrics,
    });
    metrics.onCollect(() => {
      const s = this.state();
      metrics.leaseHeld.set(s.leaseHeld ? 1 : 0);
      metrics.liveInstances.set(s.liveInstances);
      metrics.pendingWrites.set(s.registry.pendingClaims + s.registry.pendingReleases);
      metrics.cachedTenants.set(this.owners.size);
    });
  }

  /** Joins the fleet: reads the other instances, takes the lease, starts the background work. */
  static async start(opts: FleetOptions): Promise<Fleet> {
    const fleet = new Fleet(opts);
    await fleet.instances.start();
    // Once our own lease is written, read the others' again: instances that joined while this
    // one was starting count towards serverCount from the first agents on, not a heartbeat later.
    fleet.keeper.once("acquired", () => void fleet.instances.refresh());
    fleet.keeper.start();
    fleet.writer.start();
    fleet.sweeper.start();
    return fleet;
  }

  /**
   * The directory the gateway dials through, given its local registry; also keeps the ownership
   * rows of the agents connected there.
   */
  directory(local: BackendRegistry): AgentDirectory {
    local.on("added", (session) => this.agentAdded(session));
    local.on("removed", (session) => this.agentRemoved(session, local));
    return new FleetDirectory(local, {
      owners: this.owners,
      instances: this.instances,
      links: this.links,
      readTimeoutMs: ROUTE_READ_TIMEOUT_MS,
      probe: this.probe,
      registry: this.registryHealth,
    });
  }

  /** The peer port, where the other instances forward dials for the agents here. */
  readonly servePeers = buildPeerListener;

  /**
   * serverCount for a connecting agent: the redundancy asked for, but no more than are alive.
   * This instance counts itself while it is not draining, whether or not its own lease has been
   * read back yet: an agent connecting to it is proof enough, and the first read at start-up
   * comes before the lease is written, which made the first agents hold one stream too few.
   */
  serverCount(): number {
    const live = this.instances.liveCount(this.opts.instanceId) + (this.draining ? 0 : 1);
    return Math.max(1, Math.min(this.opts.agentRedundancy, live));
  }

  /**
   * Calls `listener` with the new serverCount whenever a read of the leases changes it, so that
   * agents connected earlier hold as many streams as new ones are told to (AgentSession's
   * announceServerCount). Returns an unsubscribe function.
   */
  onServerCountChange(listener: (count: number) => void): () => void {
    this.serverCountListeners.add(listener);
    return () => this.serverCountListeners.delete(listener);
  }

  private serverCountMayHaveChanged(): void {
    const count = this.serverCount();
    if (count === this.lastServerCount) return;
    this.lastServerCount = count;
    for (const l of this.serverCountListeners) l(count);
  }

  /**
   * Hosted readiness: this instance holds its lease (agents or not) and is not draining. While
   * the registry is unreachable or hung, every instance's lease runs out at once and none can
   * renew it: an instance that held its lease before the outage (and lost it to nobody) stays
   * ready then, serving what it knows, rather than the whole fleet reporting unready together
   * (readyOnLease: a heartbeat still outstanding counts as failing, so the registry's latency
   * never decides readiness).
   */
  ready(): boolean {
    return !this.draining && readyOnLease(this.keeper.state());
  }

  state(): FleetState {
    const lease = this.keeper.state();
    const writer = this.writer.state();
    return {
      instanceId: this.opts.instanceId,
      leaseHeld: lease.held,
      draining: this.draining,
      liveInstances: this.instances.liveCount(),
      registry: {
        lastError: (lease.lastError ?? writer.lastError)?.message ?? null,
        consecutiveFailures: Math.max(lease.consecutiveFailures, writer.consecutiveFailures),
        heartbeatOutstandingMs:
          lease.outstandingSince === null ? null : (this.opts.clock ?? Date.now)() - lease.outstandingSince,
        pendingClaims: writer.pendingClaims,
        pendingReleases: writer.pendingReleases,
      },
    };
  }

  /** The status API's view of the fleet: fleet-status-source.ts. */
  statusOf(self: InstanceSlice, tenant: string | undefined): Promise<InstanceAnswer[]> {
    return this.statusSource.statusOf(self, tenant);
  }

  /**
   * SIGTERM's first step: the lease says draining, so every other instance routes elsewhere as
   * soon as it re-reads the leases (a heartbeat interval). Never throws: a registry outage must
   * not hold up the shutdown.
   */
  async drain(): Promise<void> {
    this.draining = true;
    await this.keeper.setDraining().catch((err: Error) => {
      this.log.warn({ err: err.message }, "could not mark this instance draining in the registry");
    });
  }

  /**
   * Leaves the fleet: the agents' rows are released (within `flushMs`), the lease is released,
   * peer links closed (tunnels still on them break).
   */
  stop(flushMs: number): Promise<void> {
    this.stopping ??= this.leave(flushMs);
    return this.stopping;
  }

  private async leave(flushMs: number): Promise<void> {
    await this.writer.flush(flushMs).catch(() => false);
    this.writer.close();
    await this.sweeper.stop();
    this.instances.stop();
    await this.keeper.stop().catch((err: Error) => {
      this.log.warn({ err: err.message }, "could not release the lease; it expires on its own");
    });
    await this.links.close();
    await this.opts.registry.close();
  }

  /**
   * After each read of the leases: links to instances whose lease is gone, expired, or held by a
   * newer incarnation are pruned (server ids and incarnations are new with every deploy).
   */
  private pruneLinks(): void {
    const leases = this.instances.all();
    const at = this.instances.judgeAt();
    const pruned = this.links.prune((peer) => {
      const lease = leases.get(peer.id);
      return lease !== undefined && lease.incarnation === peer.incarnation && lease.expiresAt > at;
    });
    if (pruned > 0) this.log.debug({ pruned }, "pruned the peer links of instances whose lease is gone");
  }

  private agentAdded(session: AgentSession): void {
    const { tenant, agentId } = session.info;
    this.rows.set(session, this.writer.claimed(tenant, agentId));
  }

  private agentRemoved(session: AgentSession, local: BackendRegistry): void {
    const row = this.rows.get(session);
    if (!row) return;
    this.rows.delete(session);
    // The same agent may hold another stream here still (it reconnected before that one ended,
    // or it opened a duplicate that it closes as soon as it sees our serverID). If the stream
    // that ended held the newer row, claim a new one for the stream left *instead of*
    // releasing: a release first would delete the row in the table until the claim lands, and
    // an agent's duplicates (every sync interval while it is short of servers) would make its
    // row flap, and dials from other instances fail as "no agent". If it held the older row, its
    // release is fenced by the writer and leaves the newer row alone.
    const { tenant, agentId } = session.info;
    // streamsOf, not a scan of the tenant's agents: 10,000 of them leaving at once stays linear.
    const [other] = local.streamsOf(tenant, agentId);
    const otherRow = other && this.rows.get(other);
    if (other && otherRow && otherRow.session < row.session) {
      this.rows.set(other, this.writer.claimed(tenant, agentId));
      return;
    }
    this.writer.released(row);
  }
}
