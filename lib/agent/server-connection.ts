/**
 * One agent stream to one proxy server, over its own TCP connection: kgw-tunnel/1 when the
 * server offers it (and --server-transport allows), gRPC AgentService.Connect otherwise.
 *
 * `open` resolves once the server has accepted the stream and answered with its headers
 * (serverID, serverCount); from then on a BackendDialer serves the stream. The connection closes
 * itself, exactly once, when the stream ends or fails, when the transport is found broken, or
 * when `close` (at once) or `end` (in order, so that a DRAIN written just before still arrives) is
 * called; it then emits "closed", and has released everything, backend sockets, the stream, its
 * connection and its timers, once the stream is over.
 */

import { EventEmitter } from "node:events";
import { status } from "@grpc/grpc-js";
import { EGRESS_HEADER, EGRESS_V1 } from "../egress/egress-wire.js";
import { ProtocolError } from "../errors.js";
import type { AgentMetrics } from "../metrics/agent-metrics.js";
import type { Logger } from "../observability/logger.js";
import { AGENT_VERSION_HEADER, BEARER_PREFIX, Header } from "../proto/headers.js";
import { KGW_VERSION } from "../tenancy/manifest/images.js";
import { headerValues } from "../transport/tunnel-handshake.js";
import { DRAIN_HEADER, DRAIN_V1 } from "../tunnel/drain-advice.js";
import { CREDIT_FLOW_V1, FLOW_CONTROL_HEADER, negotiatedFlow } from "../tunnel/flow-control.js";
import { SERVER_COUNT_HEADER, SERVER_COUNT_V1 } from "../tunnel/server-count-updates.js";
import { BackendDialer, type BackendDialerOptions } from "./backend-dialer.js";
import {
  SERVER_DRAINED_END_GRACE_MS,
  SERVER_HANDSHAKE_TIMEOUT_MS,
  SERVER_STREAM_END_GRACE_MS,
  TUNNEL_REPROBE_MS,
} from "./durations.js";
import type { ServerEndpoint } from "./server-endpoint.js";
import type { TokenSource } from "./token-source.js";
import { openGrpcStream } from "./transports/grpc-transport.js";
import type { HeaderMap, OpenedStream, StreamEnd } from "./transports/opened-stream.js";
import { openTunnelStream, TunnelNotOfferedError } from "./transports/tunnel-transport.js";

export interface ServerConnectionDeps {
  agentId: string;
  /** "" sends no agentIdentifiers header. */
  agentIdentifiers: string;
  token: TokenSource;
  probeIntervalMs: number;
  handshakeTimeoutMs?: number;
  dialer: Omit<BackendDialerOptions, "log" | "metrics">;
  log: Logger;
  metrics: AgentMetrics;
}

export interface EndOptions {
  /**
   * The server is draining and the stream carries nothing any more: backend connections the
   * server closed finish writing, and the server gets SERVER_DRAINED_END_GRACE_MS to answer.
   */
  drained?: boolean;
}

function single(headers: HeaderMap, name: string): string | undefined {
  const values = headerValues(headers, name);
  return values.length === 1 ? values[0] : undefined;
}

const grpcOnlyUntil = new WeakMap<ServerEndpoint, number>();

/**
 * Endpoints whose servers have shown themselves ours (a kgw-tunnel/1 WELCOME, or gRPC response
 * headers acknowledging our flow control): later gRPC channels to them carry liveness PINGs,
 * which upstream's servers would answer with GOAWAY. Behind one address runs one product.
 */
const knownOurs = new WeakSet<ServerEndpoint>();

async function openStream(endpoint: ServerEndpoint, md: HeaderMap, deps: ServerConnectionDeps) {
  const timeoutMs = deps.handshakeTimeoutMs ?? SERVER_HANDSHAKE_TIMEOUT_MS;
  if (endpoint.transport === "auto" && (grpcOnlyUntil.get(endpoint) ?? 0) <= Date.now()) {
    try {
      const opened = await openTunnelStream(endpoint.tunnel, md, timeoutMs);
      knownOurs.add(endpoint);
      return opened;
    } catch (err) {
      if (!(err instanceof TunnelNotOfferedError)) throw err;
      grpcOnlyUntil.set(endpoint, Date.now() + TUNNEL_REPROBE_MS);
      deps.log.info({ reason: err.message }, "server does not offer kgw-tunnel/1; using gRPC");
    }
  }
  const ours = knownOurs.has(endpoint);
  const opened = await openGrpcStream(ours ? endpoint.grpcOurs : endpoint.grpc, md, timeoutMs);
  if (!ours && negotiatedFlow(headerValues(opened.headers, FLOW_CONTROL_HEADER)) === "credit") {
    knownOurs.add(endpoint);
    deps.log.info("server is a konnectivity-gateway: later gRPC streams check its liveness with PINGs");
  }
  return opened;
}

export class ServerConnection extends EventEmitter<{
  closed: [reason: string];
  load: [load: number];
  serverDraining: [];
  serverCount: [count: number];
}> {
  readonly serverId: string;
  /** As the server announced it, in its headers or in an update since; at least 1. */
  serverCount: number;
  private readonly dialer: BackendDialer;
  private readonly log: Logger;
  private readonly probe: NodeJS.Timeout;
  private closedReason: string | null = null;
  /** The server sent DRAIN: it is shutting down, and new dials will not come this way. */
  serverDraining = false;
  /** Settles when the stream is over, whoever ended it. */
  private readonly over: Promise<void>;

  /** Opens a stream and waits for the server's headers; rejects (having cleaned up) otherwise. */
  static async open(endpoint: ServerEndpoint, deps: ServerConnectionDeps): Promise<ServerConnection> {
    const token = await deps.token();
    const md: Record<string, string[]> = { [Header.agentId]: [deps.agentId] };
    if (deps.agentIdentifiers) md[Header.agentIdentifiers] = [deps.agentIdentifiers];
    if (token) md[Header.authorization] = [BEARER_PREFIX + token];
    // Offer per-connection flow control; only our server answers it (lib/tunnel/flow-control.ts).
    md[FLOW_CONTROL_HEADER] = [CREDIT_FLOW_V1];
    // Ask for each dial's egress policy, to judge what names resolve to (lib/egress/egress-wire.ts).
    md[EGRESS_HEADER] = [EGRESS_V1];
    // Ask to be sent DRAIN when the server shuts down, to move before the stream is cut
    // (lib/tunnel/drain-advice.ts).
    md[DRAIN_HEADER] = [DRAIN_V1];
    // Ask to be told when serverCount changes, to follow a fleet that grows after we joined it
    // (lib/tunnel/server-count-updates.ts).
    md[SERVER_COUNT_HEADER] = [SERVER_COUNT_V1];
    // Our version, for the server's status API (ignored by upstream servers).
    md[AGENT_VERSION_HEADER] = [KGW_VERSION];

    const opened = await openStream(endpoint, md, deps);
    const serverId = single(opened.headers, Header.serverId);
    const countText = single(opened.headers, Header.serverCount);
    if (!serverId || countText === undefined || !/^\d+$/.test(countText)) {
      opened.close();
      throw new ProtocolError(
        `server must answer with one ${Header.serverId} and one numeric ${Header.serverCount} header`,
      );
    }
    // Upstream falls back to 1 when a server reports 0.
    return new ServerConnection(opened, serverId, Math.max(1, Number(countText)), deps);
  }

  private constructor(
    private readonly opened: OpenedStream,
    serverId: string,
    serverCount: number,
    private readonly deps: ServerConnectionDeps,
  ) {
    super();
    this.serverId = serverId;
    this.serverCount = serverCount;
    this.log = deps.log.child({ serverId });
    const flow = negotiatedFlow(headerValues(opened.headers, FLOW_CONTROL_HEADER));
    this.log.debug({ flow, transport: opened.transport }, "server connection established");
    this.dialer = new BackendDialer(opened.stream, {
      ...deps.dialer,
      flow,
      log: this.log,
      metrics: deps.metrics,
    });
    this.dialer.on("load", (load) => this.emit("load", load));
    this.dialer.on("serverCount", (count) => {
      // Upstream falls back to 1 when a server reports 0.
      const next = Math.max(1, count);
      if (next === this.serverCount || this.closedReason !== null) return;
      this.log.info({ from: this.serverCount, to: next }, "server announced a new serverCount");
      this.serverCount = next;
      this.emit("serverCount", next);
    });
    this.dialer.on("serverDraining", () => {
      if (this.serverDraining || this.closedReason !== null) return;
      this.serverDraining = true;
      this.log.info({ load: this.load }, "server is draining; moving to another server");
      this.emit("serverDraining");
    });
    this.dialer.once("closed", () => this.close("stream closed"));
    opened.onEnd((end) => this.onStreamEnd(end));
    this.over = new Promise((resolve) => opened.onEnd(() => resolve()));
    this.probe = setInterval(() => {
      const broken = this.opened.brokenReason();
      if (broken) this.close(broken);
    }, deps.probeIntervalMs);
    this.probe.unref();
  }

  /** "grpc" or "tunnel". */
  get transport(): OpenedStream["transport"] {
    return this.opened.transport;
  }

  /** Dials in flight plus open backend connections. */
  get load(): number {
    return this.dialer.load;
  }

  get isClosed(): boolean {
    return this.closedReason !== null;
  }

  /** Sends DRAIN: the server should route new dials to other agents. Open connections go on. */
  drain(): void {
    this.dialer.sendDrain();
  }

  /** Closes at once: the stream is cut, and whatever it still had queued is lost. */
  close(reason: string): void {
    if (!this.release(reason)) return;
    this.opened.close();
  }

  /**
   * Ends the stream in order, for a deliberate stop. Cutting it (`close`: a gRPC cancel, a
   * destroyed socket) drops what is still queued, and an idle agent stops right after its DRAIN:
   * on gRPC the server never saw it. Here our end of stream goes out behind everything already
   * written, so the server has read all of it when it ends its side in turn. Resolves once the
   * stream is over; a server that does not answer within SERVER_STREAM_END_GRACE_MS is cut off.
   */
  async end(reason: string, opts: EndOptions = {}): Promise<void> {
    if (!this.release(reason, opts.drained === true)) return this.over;
    this.opened.stream.end();
    const graceMs = opts.drained ? SERVER_DRAINED_END_GRACE_MS : SERVER_STREAM_END_GRACE_MS;
    let timer: NodeJS.Timeout | undefined;
    const answered = await Promise.race([
      this.over.then(() => true),
      new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs))),
    ]);
    clearTimeout(timer);
    if (!answered) {
      // What it had not read by then is lost: worth a line when tunnels had just finished on it.
      const log = opts.drained ? this.log.warn.bind(this.log) : this.log.debug.bind(this.log);
      log({ reason, graceMs }, "server did not end its side of the stream in time; cutting it");
    }
    this.opened.close(); // cuts a stream that is not over yet, and frees its transport
  }

  /** Everything but the stream, once; false when already done. */
  private release(reason: string, letFlush = false): boolean {
    if (this.closedReason !== null) return false;
    this.closedReason = reason;
    clearInterval(this.probe);
    this.dialer.shutdown(letFlush);
    this.log.debug({ reason }, "server connection closed");
    this.emit("closed", reason);
    return true;
  }

  private onStreamEnd(end: StreamEnd): void {
    if (end.error && this.closedReason === null) {
      const code = end.code !== undefined ? (status[end.code] ?? String(end.code)) : "Unknown";
      this.deps.metrics.streamErrors.inc({ segment: "to_agent", code, packet_type: "Unknown" });
      this.deps.metrics.serverFailures.inc({ direction: "from_server" });
    }
    this.close(end.reason);
  }
}
