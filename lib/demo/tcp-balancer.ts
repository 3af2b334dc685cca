/**
 * A small TCP load balancer for `npm run fleet:local`, standing in for the NLB in front of the
 * hosted fleet (cdk/): it passes TCP through (TLS ends at the gateway, as with the NLB's TCP
 * listener on 8132), spreads new connections round-robin over the targets whose health checks
 * pass (target-health.ts), and leaves established connections alone when a target turns
 * unhealthy; they end when the target does. Like the NLB it fails open: with no healthy target it
 * spreads over all of them. A connection a target refuses is tried on the next one, so that a
 * dial in the moment between an instance dying and its checks failing still gets through.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { listenTcp } from "../transport/listen.js";
import { SocketTracker } from "../transport/socket-tracker.js";
import {
  BALANCER_CHECK_INTERVAL_MS,
  BALANCER_CHECK_TIMEOUT_MS,
  BALANCER_CONNECT_TIMEOUT_MS,
  BALANCER_THRESHOLD,
} from "./durations.js";
import { type HealthCheckSettings, TargetHealth } from "./target-health.js";
import { splice } from "./tcp-splice.js";

export interface BalancerTarget {
  /** For the operator's eyes: "instance 1". */
  name: string;
  host: string;
  port: number;
  /** The URL whose 200 means "send connections here" (an instance's /readyz). */
  healthUrl: string;
}

export interface TargetState {
  name: string;
  port: number;
  healthy: boolean;
  /** Connections passed to it since the balancer started. */
  connections: number;
}

export interface TcpBalancerOptions {
  host: string;
  /** 0: a free port. */
  port: number;
  health?: Partial<HealthCheckSettings>;
  connectTimeoutMs?: number;
  /** A target turned healthy or unhealthy. */
  onChange?: (target: TargetState) => void;
}

interface Entry {
  target: BalancerTarget;
  health: TargetHealth;
  connections: number;
}

export class TcpBalancer {
  private entries: Entry[] = [];
  private next = 0;
  private readonly sockets = new SocketTracker();
  private readonly settings: HealthCheckSettings;
  private readonly connectTimeoutMs: number;

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly opts: TcpBalancerOptions,
  ) {
    this.settings = {
      intervalMs: opts.health?.intervalMs ?? BALANCER_CHECK_INTERVAL_MS,
      timeoutMs: opts.health?.timeoutMs ?? BALANCER_CHECK_TIMEOUT_MS,
      threshold: opts.health?.threshold ?? BALANCER_THRESHOLD,
    };
    this.connectTimeoutMs = opts.connectTimeoutMs ?? BALANCER_CONNECT_TIMEOUT_MS;
  }

  /** Listens on `opts.port` (a busy port rejects with the listener's ConfigError). */
  static async start(opts: TcpBalancerOptions): Promise<TcpBalancer> {
    let balancer: TcpBalancer | undefined;
    // Half-open both ways, as TCP through an NLB is: a client's FIN is passed on, and the target's
    // answer still flows back until the target ends too.
    const server = createServer({ pauseOnConnect: true, allowHalfOpen: true }, (socket) =>
      balancer?.accept(socket),
    );
    const address = await listenTcp(server, opts.port, opts.host);
    balancer = new TcpBalancer(server, address.port, opts);
    return balancer;
  }

  /** Replaces the targets (their health is checked from now on, starting unhealthy). */
  setTargets(targets: readonly BalancerTarget[]): void {
    for (const e of this.entries) e.health.stop();
    this.entries = targets.map((target) => {
      const entry: Entry = {
        target,
        connections: 0,
        health: new TargetHealth(target.healthUrl, this.settings, () =>
          this.opts.onChange?.(this.stateOf(entry)),
        ),
      };
      return entry;
    });
    for (const e of this.entries) e.health.start();
  }

  targets(): TargetState[] {
    return this.entries.map((e) => this.stateOf(e));
  }

  /** Health checks completed, over all targets (for waiting on a check rather than on time). */
  get checksDone(): number {
    return this.entries.reduce((n, e) => n + e.health.checksDone, 0);
  }

  /** Sockets open now, clients' and targets' sides both. */
  get openConnections(): number {
    return this.sockets.size;
  }

  async close(): Promise<void> {
    for (const e of this.entries) e.health.stop();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.sockets.destroyAll();
    });
  }

  private stateOf(e: Entry): TargetState {
    return {
      name: e.target.name,
      port: e.target.port,
      healthy: e.health.healthy,
      connections: e.connections,
    };
  }

  /** The targets to try for one connection, in order: healthy ones round-robin, else all. */
  private order(): Entry[] {
    const healthy = this.entries.filter((e) => e.health.healthy);
    const pool = healthy.length > 0 ? healthy : this.entries;
    if (pool.length === 0) return [];
    const start = this.next++ % pool.length;
    return [...pool.slice(start), ...pool.slice(0, start)];
  }

  private accept(client: Socket): void {
    this.sockets.add(client);
    client.on("error", () => client.destroy());
    this.forward(client, this.order());
  }

  private forward(client: Socket, candidates: Entry[]): void {
    const entry = candidates[0];
    if (!entry || client.destroyed) {
      client.destroy();
      return;
    }
    const upstream = connect({ host: entry.target.host, port: entry.target.port, allowHalfOpen: true });
    this.sockets.add(upstream);
    upstream.setTimeout(this.connectTimeoutMs, () => upstream.destroy(new Error("connect timed out")));
    let connected = false;
    upstream.once("connect", () => {
      connected = true;
      upstream.setTimeout(0);
      entry.connections++;
      splice(client, upstream);
      client.resume();
    });
    upstream.on("error", () => {
      if (connected) return; // "close" follows and ends the client
      upstream.destroy();
      this.forward(client, candidates.slice(1));
    });
  }
}
