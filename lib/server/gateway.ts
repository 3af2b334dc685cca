/**
 * One gateway instance: the composition root. It takes the policy (who agents and callers are,
 * which dials are allowed) from its caller, builds the agent registry and the Dialer every
 * frontend uses, and starts the listeners (listeners/), then owns their lifecycle: graceful
 * shutdown and close. Behaviour lives in the pieces it wires:
 *  - core/: sessions and agent choice, free of sockets and of policy;
 *  - listeners/: the transports that feed them (agent port, frontend, CONNECT);
 *  - policy/: authentication and authorization, injected;
 *  - audit/: the audit record of every dial (to an injected sink) and per-tenant metrics.
 */
import type { AddressInfo, Socket } from "node:net";
import type { ServerOptions } from "../config/server-options.js";
import { DrainedError, type GatewayError, ShuttingDownError } from "../errors.js";
import { ServerMetrics } from "../metrics/server-metrics.js";
import { sourceKey } from "../transport/handshake-gate.js";
import type { RunningHttpServer } from "../transport/http-endpoints.js";
import { listenTcp } from "../transport/listen.js";
import { RefusalThrottle } from "../transport/refusal-throttle.js";
import { TurnQueue } from "../transport/turn-queue.js";
import { pollUntil } from "../util/poll-until.js";
import { openAuditLog } from "./audit/audit-log.js";
import { type AuditSink, discardAudit } from "./audit/audit-sink.js";
import { DialTracker, type DialTrackerDeps, forwardedDial } from "./audit/dial-tracker.js";
import { TenantMetrics } from "./audit/tenant-metrics.js";
import { BackendRegistry } from "./core/backend-registry.js";
import type { AgentDirectory, Dialer } from "./core/dial-context.js";
import type { GrpcFrontendSession } from "./core/frontend-session.js";
import { chooserFor } from "./core/proxy-strategies.js";
import { markPolicyStep } from "./dial-step-marks.js";
import {
  CUT_RECORDS_MS,
  DRAIN_POLL_MS,
  DRAIN_SETTLE_MS,
  IDLE_PROBES_PER_SECOND,
  idleProbeBatchMs,
  REFUSAL_THROTTLE_COOLDOWN_MS,
  REFUSAL_THROTTLE_MAX_SOURCES,
} from "./durations.js";
import type { GatewayAddresses, GatewayDeps } from "./gateway-deps.js";
import type { ReadinessState } from "./health-routes.js";
import { startHttpPorts } from "./http-ports.js";
import { buildAgentListener } from "./listeners/agent-listener.js";
import { createCallerFront } from "./listeners/caller-front.js";
import { buildFrontendListeners } from "./listeners/frontend-listeners.js";
import { buildInstallListener } from "./listeners/install-listener.js";
import { ListenerSet } from "./listeners/listener-set.js";
import type { GatewayPolicy } from "./policy/gateway-policy.js";
import { releasingOnCancel, releasingOnEnd, unlimitedQuotas } from "./policy/tenant-quotas.js";
import { directoryOf, type GatewayRouting } from "./routing.js";
import { GatewayStatus } from "./status/gateway-status.js";

/** At close, how long the fleet may take to delete the rows of the agents that were here. */
const FLEET_FLUSH_MS = 2_000;

export class Gateway {
  readonly metrics: ServerMetrics;
  readonly registry: BackendRegistry;
  readonly tenantMetrics: TenantMetrics;
  /** The status model's memory and its faces (lib/server/status/). */
  readonly status: GatewayStatus;
  /** deps.policy, its authenticators noting each credential's use for the status API. */
  private readonly policy: GatewayPolicy;
  private readonly routing: GatewayRouting;
  private readonly directory: AgentDirectory;
  private readonly tracking: DialTrackerDeps;
  private accepting = true;
  /** Set once close() began, to what cuts open tunnels; from then on a dial is refused. */
  private closing: GatewayError | null = null;
  /**
   * Dials and tunnels open through this instance, whatever carries them: a tunnel to a local
   * agent is also in its session's load, but one that left over a peer link is only here.
   */
  private openDials = 0;
  /** Periodic liveness probes of all agents together (IDLE_PROBES_PER_SECOND), one timer. */
  private readonly idleProbes: TurnQueue;
  private readonly frontendSessions = new Set<GrpcFrontendSession>();
  /**
   * CONNECT tunnels that ended cleanly but whose socket is still sending the last bytes and FIN:
   * a drain waits for them, since destroying such a socket truncates what the caller reads.
   */
  private readonly endingTunnels = new Set<Socket>();
  private readonly listeners: ListenerSet;
  private readonly httpServers: RunningHttpServer[] = [];
  private closed: Promise<void> | null = null;
  addresses!: GatewayAddresses;

  private constructor(
    private readonly opts: ServerOptions,
    private readonly deps: GatewayDeps,
    metrics: ServerMetrics,
    audit: AuditSink,
  ) {
    this.metrics = metrics;
    this.idleProbes = new TurnQueue(IDLE_PROBES_PER_SECOND, idleProbeBatchMs(opts.agent.probeIntervalMs));
    this.registry = new BackendRegistry(chooserFor(opts.proxyStrategies));
    this.routing = deps.fleet ?? deps.routing ?? {};
    this.directory = directoryOf(this.routing, this.registry, opts.dialStepMetrics);
    const throttle = new RefusalThrottle({
      ...opts.refusalThrottle,
      cooldownMs: REFUSAL_THROTTLE_COOLDOWN_MS,
      maxSources: REFUSAL_THROTTLE_MAX_SOURCES,
    });
    metrics.onThrottleCollect(() => metrics.throttledSources.set(throttle.throttledCount()));
    this.listeners = new ListenerSet(deps.log, this.metrics, throttle);
    this.tenantMetrics = new TenantMetrics(metrics, opts.tenantMetricsLimit);
    this.registry.on("changed", (tenant) =>
      this.tenantMetrics.agentsChanged(tenant, this.registry.count(tenant)),
    );
    this.status = new GatewayStatus(opts.serverId, {
      draining: () => !this.accepting,
      registry: this.registry,
      openTunnels: () => this.openDials,
      ...(deps.fleet ? { fleet: deps.fleet } : {}),
    });
    this.policy = markPolicyStep(this.status.observe(deps.policy), opts.dialStepMetrics);
    const [activity, cutting] = [this.status.activity, () => this.closing];
    this.tracking = { sink: audit, tenants: this.tenantMetrics, instance: opts.serverId, activity, cutting };
    // Agents connected before the fleet grew (or shrank) are told, as new ones would be.
    deps.fleet?.onServerCountChange((count) => {
      for (const session of this.registry.all()) session.announceServerCount(count);
    });
  }

  static async start(opts: ServerOptions, deps: GatewayDeps): Promise<Gateway> {
    const metrics = deps.metrics ?? new ServerMetrics();
    const audit =
      deps.audit ??
      (opts.auditLog ? await openAuditLog(opts.auditLog, { log: deps.log, metrics }) : discardAudit);
    const gw = new Gateway(opts, deps, metrics, audit);
    try {
      await gw.listen();
    } catch (err) {
      await gw.close();
      throw err;
    }
    deps.log.info({ serverId: opts.serverId, addresses: gw.addresses }, "gateway listening");
    if (gw.addresses.frontend && opts.frontend.anonymousCallers) {
      // Asked for by a flag (server-options.ts refuses it otherwise); still worth a line at every
      // start, since a tunnel reaches everything the agents can.
      deps.log.warn(
        { frontend: gw.addresses.frontend, tls: opts.frontend.tls !== null },
        "the TCP frontend accepts anonymous callers: anyone who can reach it can open tunnels into the cluster",
      );
    }
    if (opts.tenancy && !deps.audit && !opts.auditLog) {
      // Off unless asked for, as kube-apiserver's audit log is; a hosted gateway usually wants it.
      deps.log.warn("serving tenants without an audit log: dials are not recorded (--audit-log)");
    }
    return gw;
  }

  /**
   * Ready to serve dials, and not shutting down: alone, at least one agent connected and
   * answering; in a fleet, holding its lease (dials reach agents anywhere in the fleet).
   */
  get ready(): boolean {
    if (!this.accepting) return false;
    return this.deps.fleet ? this.deps.fleet.ready() : this.registry.responsiveCount > 0;
  }

  /** Dials and connections currently carried, across all agents. */
  get activeTunnels(): number {
    let n = 0;
    for (const s of this.registry.all()) n += s.load;
    return n;
  }

  /**
   * Every frontend dial: still accepting, allowed by policy, then to the tenant's agents; followed
   * to its end for its audit record and its tenant's metrics, refusals included.
   */
  private readonly dial: Dialer = (ctx, req, frontend) =>
    this.dialThrough(this.directory, ctx, req, frontend);

  /**
   * A dial another instance forwarded here (lib/fleet/peer/): the same checks, quotas and audit,
   * but only this instance's own agents, so that a forwarded dial is never forwarded again.
   */
  private readonly dialLocal: Dialer = (ctx, req, frontend) =>
    this.dialThrough(this.registry, ctx, req, frontend);

  private dialThrough(
    directory: AgentDirectory,
    ...[ctx, req, frontend]: Parameters<Dialer>
  ): ReturnType<Dialer> {
    // One audit record and one count per dial, where the caller's dial arrived.
    const tracker = ctx.origin === undefined ? new DialTracker(ctx, req, this.tracking) : forwardedDial(ctx);
    try {
      // While draining, connections accepted before it began are still served (a dial on one is
      // as much a part of "open work" as a tunnel); once closing, they get a clear no.
      if (this.closing) throw new ShuttingDownError();
      const authorized = this.policy.authorizeDial(ctx, req);
      // The tenant's tunnel slot and dial token; given back when the tunnel ends, however.
      // Its base window counts against the tenant's bytes in flight; growth draws on the rest.
      const quota = (this.deps.policy.quotas ?? unlimitedQuotas).acquireTunnel(ctx.caller.tenant);
      const { windowBudget } = quota;
      // Given back exactly once, when the tunnel ends or the dial fails or is cancelled.
      this.openDials++;
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        this.openDials--;
        quota.release();
      };
      try {
        const end = releasingOnEnd(tracker.frontend(frontend), release);
        const context = windowBudget ? { ...tracker.context, windowBudget } : tracker.context;
        return tracker.handle(releasingOnCancel(directory.dial(context, authorized, end), release));
      } catch (err) {
        release();
        throw err;
      }
    } catch (err) {
      tracker.failed(err);
      throw err;
    }
  }

  private get readiness(): ReadinessState {
    return {
      accepting: () => this.accepting,
      responsiveAgents: () => this.registry.responsiveCount,
      agentsOf: (tenant) => this.registry.agents(tenant),
      ...(this.deps.fleet ? { fleet: this.deps.fleet } : {}),
    };
  }

  private async listen(): Promise<void> {
    const { opts, deps, metrics } = this;
    const callers = createCallerFront({
      dialer: this.dial,
      authenticateCaller: this.policy.authenticateCaller,
      hold: deps.policy.hold,
      sessions: this.frontendSessions,
      endingTunnels: this.endingTunnels,
      log: deps.log,
      metrics,
      dialStepMetrics: opts.dialStepMetrics,
      ...(deps.callerBytesRead ? { bytesRead: deps.callerBytesRead } : {}),
      refusedFrom: (address) => {
        if (address !== undefined) this.listeners.throttle?.refused(sourceKey(address));
      },
    });
    const agentServer = buildAgentListener(
      this.listeners,
      opts,
      {
        authenticate: this.policy.authenticateAgent,
        quotas: deps.policy.quotas ?? unlimitedQuotas,
        hold: deps.policy.hold,
        registry: this.registry,
        accepting: () => this.accepting,
        ...(deps.fleet ? { serverCount: () => deps.fleet!.serverCount() } : {}),
        probeTurns: this.idleProbes,
        log: deps.log,
        metrics,
      },
      // Tenant mode: one port for every role (agent-listener.ts), own status, one-line install.
      opts.tenancy ? callers : undefined,
      opts.tenancy ? this.status.getRoutes(this.policy, deps.log, deps.policy.install) : undefined,
    );
    const frontend = await buildFrontendListeners(this.listeners, opts, callers);

    const { health, admin } = await startHttpPorts(
      opts,
      { readiness: this.readiness, metrics, status: this.status.adminRoutes(), log: deps.log },
      this.httpServers,
    );

    this.addresses = {
      frontend: frontend.tcp,
      uds: frontend.uds,
      agent: await listenTcp(agentServer, opts.agent.port, opts.agent.host),
      install: await this.listenInstall(),
      health: health.address,
      admin: admin.address,
      peer: await this.listenPeers(),
    };
  }

  /**
   * The peer port, when asked for: dials other instances forward here, served from this
   * instance's own agents only (routing.ts: the fleet, or the caller, builds its listener).
   */
  private async listenPeers(): Promise<AddressInfo | null> {
    const { opts, deps } = this;
    if (!opts.peer) return null;
    if (!this.routing.servePeers)
      throw new Error("--peer-port without a peer listener (GatewayDeps.routing)");
    return this.routing.servePeers(this.listeners, opts, {
      dialer: this.dialLocal,
      agentsOf: (tenant) =>
        this.accepting ? this.registry.agents(tenant).filter((a) => a.responsive).length : 0,
      status: this.status.local,
      log: deps.log,
      metrics: this.metrics,
    });
  }

  /** The install route's own TLS port, when asked for (listeners/install-listener.ts). */
  private async listenInstall(): Promise<AddressInfo | null> {
    const { opts, deps } = this;
    const listener = opts.tenancy?.install?.listener;
    if (!listener || !deps.policy.install) return null;
    const server = buildInstallListener(this.listeners, opts, deps.policy.install, {
      log: deps.log,
      metrics: this.metrics,
    });
    return listenTcp(server, listener.port, listener.host);
  }

  /**
   * Graceful stop: refuse new work, let open tunnels finish within --graceful-shutdown-timeout,
   * then close everything. Our agents are sent DRAIN first and reconnect to another instance
   * while their tunnels here finish; the others see their stream end and reconnect then.
   */
  async shutdown(): Promise<void> {
    if (this.accepting) {
      // First the fleet: the others stop routing here while this instance still serves.
      await this.deps.fleet?.drain();
      this.accepting = false;
      this.deps.log.info({ activeTunnels: this.activeTunnels }, "shutting down: waiting for open tunnels");
      this.listeners.drain();
      // Our agents that asked for it are told to move now, while their tunnels here go on
      // (make-before-break); upstream agents see their stream closed, as upstream does.
      let advised = 0;
      for (const session of this.registry.all()) if (session.adviseDrain()) advised++;
      if (advised > 0) this.deps.log.info({ agents: advised }, "advised agents to reconnect elsewhere");
      const drainStart = Date.now();
      const deadline = drainStart + this.opts.gracefulShutdownMs;
      for (;;) {
        // An agent with nothing open here goes at once, to reconnect to another instance; the
        // others as soon as their last tunnel ends.
        for (const session of [...this.registry.all()])
          if (session.load === 0) session.close(new ShuttingDownError());
        // Done when nothing is open, no handshake of a connection accepted before the listeners
        // closed is still under way, and those that finished have had DRAIN_SETTLE_MS to ask.
        const settled =
          Date.now() >= drainStart + DRAIN_SETTLE_MS && this.listeners.handshakesInProgress === 0;
        const idle = this.activeTunnels === 0 && this.openDials === 0 && this.endingTunnels.size === 0;
        if ((idle && settled) || Date.now() >= deadline) break;
        await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
      }
      // What is still open is cut by the drain, not by its agent: audited as drained.
      return this.close(new DrainedError(`the gateway's drain ended with the tunnel open`));
    }
    await this.close();
  }

  /** Immediate stop: every tunnel, stream and socket is closed, open tunnels with `cut`. Idempotent. */
  close(cut: GatewayError = new ShuttingDownError()): Promise<void> {
    this.closed ??= (async () => {
      this.accepting = false;
      this.closing = cut;
      for (const session of [...this.registry.all()]) session.close(cut);
      for (const session of this.frontendSessions) session.abort();
      await Promise.all([this.listeners.close(), ...this.httpServers.map((h) => h.close())]);
      await this.deps.fleet?.stop(FLEET_FLUSH_MS);
      await this.deps.policy.close?.();
      await pollUntil(() => this.openDials === 0, CUT_RECORDS_MS); // every cut tunnel's record first
      await this.tracking.sink.close?.();
      this.deps.log.info("gateway stopped");
    })();
    return this.closed;
  }
}
