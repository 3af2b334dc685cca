/**
 * One gateway instance: the composition root. It takes the policy (who agents and callers are,
 * which dials are allowed) from its caller, builds the agent registry and the Dialer every
 * frontend uses, and starts the listeners (listeners/), then owns their lifecycle: graceful
 * shutdown and close. Behaviour lives in the pieces it wires:
 *  - core/: sessions and agent choice, free of sockets and of policy;
 *  - listeners/: the transports that feed them (agent port, frontend, CONNECT);
 *  - policy/: authentication and authorization, injected.
 */
import type { AddressInfo } from "node:net";
import type { ServerOptions } from "../config/server-options.js";
import { ShuttingDownError } from "../errors.js";
import { ServerMetrics } from "../metrics/server-metrics.js";
import type { Logger } from "../observability/logger.js";
import { metricsRoute, type RunningHttpServer, startHttpServer } from "../transport/http-endpoints.js";
import { listenTcp } from "../transport/listen.js";
import { BackendRegistry } from "./core/backend-registry.js";
import type { AgentDirectory, Dialer } from "./core/dial-context.js";
import type { GrpcFrontendSession } from "./core/frontend-session.js";
import { chooserFor } from "./core/proxy-strategies.js";
import { buildAgentListener } from "./listeners/agent-listener.js";
import { createCallerFront } from "./listeners/caller-front.js";
import { buildFrontendListeners } from "./listeners/frontend-listeners.js";
import { ListenerSet } from "./listeners/listener-set.js";
import type { GatewayPolicy } from "./policy/gateway-policy.js";
import { DRAIN_POLL_MS } from "./timeouts.js";

export interface GatewayAddresses {
  frontend: AddressInfo | null;
  uds: string | null;
  agent: AddressInfo;
  admin: AddressInfo;
  health: AddressInfo;
}

export interface GatewayDeps {
  log: Logger;
  /**
   * Authentication and authorization (policy/open-policy.ts picks the drop-in's or the tenant
   * store's). The gateway closes it when it closes.
   */
  policy: GatewayPolicy;
  /**
   * Where dials go, given the local agent registry: the registry itself unless a fleet wraps it
   * with remote owners.
   */
  directory?: (local: BackendRegistry) => AgentDirectory;
  metrics?: ServerMetrics;
}

export class Gateway {
  readonly metrics: ServerMetrics;
  readonly registry: BackendRegistry;
  private readonly directory: AgentDirectory;
  private accepting = true;
  private readonly frontendSessions = new Set<GrpcFrontendSession>();
  private readonly listeners: ListenerSet;
  private readonly httpServers: RunningHttpServer[] = [];
  private closed: Promise<void> | null = null;
  addresses!: GatewayAddresses;

  private constructor(
    private readonly opts: ServerOptions,
    private readonly deps: GatewayDeps,
  ) {
    this.metrics = deps.metrics ?? new ServerMetrics();
    this.registry = new BackendRegistry(chooserFor(opts.proxyStrategies));
    this.directory = deps.directory?.(this.registry) ?? this.registry;
    this.listeners = new ListenerSet(deps.log, this.metrics);
  }

  static async start(opts: ServerOptions, deps: GatewayDeps): Promise<Gateway> {
    const gw = new Gateway(opts, deps);
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
    return gw;
  }

  /** Ready to serve dials: at least one agent connected and answering, and not shutting down. */
  get ready(): boolean {
    return this.accepting && this.registry.responsiveCount > 0;
  }

  /** Dials and connections currently carried, across all agents. */
  get activeTunnels(): number {
    let n = 0;
    for (const s of this.registry.all()) n += s.load;
    return n;
  }

  /** Every frontend dial: still accepting, allowed by policy, then to the tenant's agents. */
  private readonly dial: Dialer = (ctx, req, frontend) => {
    // Streams and sockets accepted before shutdown began may still ask; they get a clear no.
    if (!this.accepting) throw new ShuttingDownError();
    this.deps.policy.authorizeDial(ctx, req);
    return this.directory.dial(ctx, req, frontend);
  };

  private async listen(): Promise<void> {
    const { opts, deps, metrics } = this;
    const callers = createCallerFront({
      dialer: this.dial,
      authenticateCaller: deps.policy.authenticateCaller,
      hold: deps.policy.hold,
      sessions: this.frontendSessions,
      log: deps.log,
      metrics,
    });
    const agentServer = buildAgentListener(
      this.listeners,
      opts,
      {
        authenticate: deps.policy.authenticateAgent,
        hold: deps.policy.hold,
        registry: this.registry,
        accepting: () => this.accepting,
        log: deps.log,
        metrics,
      },
      // Tenant mode: one port for every role (agent-listener.ts).
      opts.tenancy ? callers : undefined,
    );
    const frontend = await buildFrontendListeners(this.listeners, opts, callers);

    const httpLog = deps.log.child({ component: "http" });
    const health = await startHttpServer(
      opts.health.host,
      opts.health.port,
      {
        "/healthz": () => ({ status: 200, body: "ok\n" }),
        "/readyz": () =>
          this.ready
            ? { status: 200, body: "ok\n" }
            : {
                status: 503,
                body: this.accepting ? "no agent connected and answering\n" : "shutting down\n",
              },
      },
      httpLog,
    );
    this.httpServers.push(health);
    const admin = await startHttpServer(
      opts.admin.host,
      opts.admin.port,
      { "/metrics": metricsRoute(metrics.registry) },
      httpLog,
    );
    this.httpServers.push(admin);

    this.addresses = {
      frontend: frontend.tcp,
      uds: frontend.uds,
      agent: await listenTcp(agentServer, opts.agent.port, opts.agent.host),
      health: health.address,
      admin: admin.address,
    };
  }

  /**
   * Graceful stop: refuse new work, let open tunnels finish within --graceful-shutdown-timeout,
   * then close everything. Agents see their stream end and reconnect to another instance.
   */
  async shutdown(): Promise<void> {
    if (this.accepting) {
      this.accepting = false;
      this.deps.log.info({ activeTunnels: this.activeTunnels }, "shutting down: waiting for open tunnels");
      this.listeners.drain();
      const deadline = Date.now() + this.opts.gracefulShutdownMs;
      while (this.activeTunnels > 0 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
      }
    }
    await this.close();
  }

  /** Immediate stop: every tunnel, stream and socket is closed. Idempotent. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      this.accepting = false;
      for (const session of [...this.registry.all()]) session.close();
      for (const session of this.frontendSessions) session.abort();
      await Promise.all([this.listeners.close(), ...this.httpServers.map((h) => h.close())]);
      await this.deps.policy.close?.();
      this.deps.log.info("gateway stopped");
    })();
    return this.closed;
  }
}
