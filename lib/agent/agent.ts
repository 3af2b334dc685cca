/**
 * Wires one agent together: server endpoint and credentials, the client set that keeps it
 * connected to every proxy server, and the health and admin HTTP servers. No globals and no
 * environment reads: everything comes in through `options` and `deps`, so tests can run several
 * agents in one process on port 0.
 *
 * Shutdown is two-step, as upstream: `drain()` tells every server to stop sending new dials and
 * waits (up to --drain-timeout) for open backend connections to finish; `stop()` closes
 * everything. Signals are the entrypoint's business.
 */
import type { AddressInfo } from "node:net";
import type { AgentOptions } from "../config/agent-options.js";
import type { AgentMetrics } from "../metrics/agent-metrics.js";
import type { Logger } from "../observability/logger.js";
import { metricsRoute, type RunningHttpServer, startHttpServer } from "../transport/http-endpoints.js";
import { ClientSet, type ClientSetState } from "./client-set.js";
import { ConnectIdAllocator } from "./connect-ids.js";
import { type DestinationPolicy, dropInDestinationPolicy } from "./destination-policy.js";
import type { SocketFactory } from "./dial-target.js";
import { healthRoutes } from "./health-routes.js";
import type { HostResolver } from "./host-resolver.js";
import { ServerConnection } from "./server-connection.js";
import { serverEndpoint } from "./server-endpoint.js";
import { createTokenSource, readTokenFile } from "./token-source.js";

export interface AgentDeps {
  log: Logger;
  metrics: AgentMetrics;
  /** Backend dialing; tests inject sockets that never connect. */
  connectSocket?: SocketFactory;
  /** Name resolution for backend dials; tests inject one that never touches DNS. */
  resolveHost?: HostResolver;
  /** Replaces the drop-in policy built from `options.destinations` (tests). */
  destinationPolicy?: DestinationPolicy;
  /** Jitter source for reconnect backoff, uniform in [0, 1). */
  random?: () => number;
  /** Override the server handshake timeout (tests). */
  handshakeTimeoutMs?: number;
  /** Told of each DIAL_REQ from any server (`kgw agent`: the dial scavenger's look). */
  dialReceived?: () => void;
}

export type DrainOutcome = "idle" | "timeout" | "stopped";

export interface RunningAgent {
  readonly agentId: string;
  /** True while connected to at least one server (what /readyz reports). */
  readonly ready: boolean;
  readonly healthAddress: AddressInfo;
  readonly adminAddress: AddressInfo;
  state(): ClientSetState;
  /** Called on every change of the server set; returns an unsubscribe function. */
  onStateChange(listener: (state: ClientSetState) => void): () => void;
  /**
   * Sends DRAIN to every server, stops opening server connections, and resolves when no backend
   * connection or dial is left, when --drain-timeout has passed, or when `stop()` was called.
   */
  drain(): Promise<DrainOutcome>;
  /** Closes every connection and both HTTP servers. Idempotent. */
  stop(): Promise<void>;
}

export async function startAgent(options: AgentOptions, deps: AgentDeps): Promise<RunningAgent> {
  const { log, metrics } = deps;
  const endpoint = serverEndpoint(options);
  // Fail at startup, not on the first connect, when the token file is missing or empty.
  if (options.auth.tokenPath) await readTokenFile(options.auth.tokenPath);
  const token = createTokenSource(options.auth);
  const connectIds = new ConnectIdAllocator();
  const destinationPolicy =
    deps.destinationPolicy ??
    dropInDestinationPolicy({ allowLinkLocal: options.destinations.allowLinkLocal });

  const clientSet = new ClientSet({
    connect: () =>
      ServerConnection.open(endpoint, {
        agentId: options.agentId,
        agentIdentifiers: options.agentIdentifiers,
        token,
        probeIntervalMs: options.sync.probeIntervalMs,
        handshakeTimeoutMs: deps.handshakeTimeoutMs,
        dialer: {
          dialTimeoutMs: options.dialTimeoutMs,
          connectIds,
          connectSocket: deps.connectSocket,
          resolveHost: deps.resolveHost,
          destinationPolicy,
          dialReceived: deps.dialReceived,
        },
        log,
        metrics,
      }),
    syncIntervalMs: options.sync.intervalMs,
    syncIntervalCapMs: options.sync.intervalCapMs,
    random: deps.random,
    log,
    metrics,
  });

  const health = await startHttpServer(
    options.health.host,
    options.health.port,
    healthRoutes(() => clientSet.ready),
    log.child({ listener: "health" }),
  );
  let admin: RunningHttpServer;
  try {
    admin = await startHttpServer(
      options.admin.host,
      options.admin.port,
      { "/metrics": metricsRoute(metrics.registry) },
      log.child({ listener: "admin" }),
    );
  } catch (err) {
    await health.close();
    throw err;
  }

  log.info(
    {
      agentId: options.agentId,
      server: endpoint.grpc.target,
      transport: options.server.transport,
      serverName: options.server.serverName,
      agentIdentifiers: options.agentIdentifiers,
      auth: options.auth.tokenPath ? "token-file" : options.auth.token ? "token" : "certificate-or-none",
      health: health.address,
      admin: admin.address,
      allowLinkLocalDestinations: options.destinations.allowLinkLocal,
    },
    "agent starting",
  );
  clientSet.start();

  let stopping: Promise<void> | null = null;
  let draining: Promise<DrainOutcome> | null = null;
  const stopped = new Promise<void>((resolve) => {
    clientSet.on("change", (s) => {
      if (s.stopped) resolve();
    });
  });

  return {
    agentId: options.agentId,
    get ready() {
      return clientSet.ready;
    },
    healthAddress: health.address,
    adminAddress: admin.address,
    state: () => clientSet.state(),
    onStateChange(listener) {
      clientSet.on("change", listener);
      return () => clientSet.off("change", listener);
    },
    drain() {
      draining ??= (async () => {
        log.info({ openConnections: clientSet.load, timeoutMs: options.drainTimeoutMs }, "draining");
        clientSet.drain();
        const outcome = await waitForIdle(clientSet, options.drainTimeoutMs, stopped);
        log.info({ outcome, openConnections: clientSet.load }, "drain finished");
        return outcome;
      })();
      return draining;
    },
    stop() {
      stopping ??= (async () => {
        await clientSet.stop();
        await Promise.all([health.close(), admin.close()]);
        log.info("agent stopped");
      })();
      return stopping;
    },
  };
}

function waitForIdle(set: ClientSet, timeoutMs: number, stopped: Promise<void>): Promise<DrainOutcome> {
  if (set.load === 0) return Promise.resolve("idle");
  return new Promise((resolve) => {
    const done = (outcome: DrainOutcome) => {
      clearTimeout(timer);
      set.off("load", onLoad);
      resolve(outcome);
    };
    const onLoad = (load: number) => {
      if (load === 0) done("idle");
    };
    const timer = setTimeout(() => done("timeout"), timeoutMs);
    set.on("load", onLoad);
    void stopped.then(() => done("stopped"));
  });
}
