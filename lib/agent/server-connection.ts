/**
 * One AgentService.Connect stream to one proxy server, over its own gRPC channel.
 *
 * `open` resolves once the server has answered with its headers (serverID, serverCount); from
 * then on a BackendDialer serves the stream. The connection closes itself, exactly once, when
 * the stream ends or fails, when the transport is found broken, or when `close` is called; it
 * then emits "closed" and has released everything: backend sockets, the call, the channel and
 * its timers.
 */

import { EventEmitter } from "node:events";
import {
  Client,
  type ClientDuplexStream,
  connectivityState,
  Metadata,
  type StatusObject,
  status,
} from "@grpc/grpc-js";
import { ProtocolError } from "../errors.js";
import type { AgentMetrics } from "../metrics/agent-metrics.js";
import type { Logger } from "../observability/logger.js";
import { decodePacket, encodePacket } from "../proto/codec.js";
import { BEARER_PREFIX, Header } from "../proto/headers.js";
import type { Packet } from "../proto/packet.js";
import { AGENT_SERVICE } from "../transport/grpc-services.js";
import { CREDIT_FLOW_V1, FLOW_CONTROL_HEADER, negotiatedFlow } from "../tunnel/flow-control.js";
import { BackendDialer, type BackendDialerOptions } from "./backend-dialer.js";
import { ServerConnectError } from "./errors.js";
import type { ServerEndpoint } from "./server-endpoint.js";
import { SERVER_HANDSHAKE_TIMEOUT_MS } from "./timeouts.js";
import type { TokenSource } from "./token-source.js";

const CONNECT_PATH = AGENT_SERVICE.connect!.path;

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

function singleHeader(md: Metadata, key: string): string | undefined {
  const values = md.get(key);
  return values.length === 1 && typeof values[0] === "string" ? values[0] : undefined;
}

export class ServerConnection extends EventEmitter<{ closed: [reason: string]; load: [load: number] }> {
  serverId = "";
  /** As the server announced it; at least 1. */
  serverCount = 1;
  private readonly client: Client;
  private readonly call: ClientDuplexStream<Packet, Packet>;
  private dialer: BackendDialer | null = null;
  private log: Logger;
  private probe: NodeJS.Timeout | undefined;
  private closedReason: string | null = null;
  private handshake: { resolve: () => void; reject: (err: Error) => void; timer: NodeJS.Timeout } | null =
    null;

  /** Opens a stream and waits for the server's headers; rejects (having cleaned up) otherwise. */
  static async open(endpoint: ServerEndpoint, deps: ServerConnectionDeps): Promise<ServerConnection> {
    const token = await deps.token();
    const conn = new ServerConnection(endpoint, token, deps);
    await conn.handshakeDone;
    return conn;
  }

  private readonly handshakeDone: Promise<void>;

  private constructor(
    endpoint: ServerEndpoint,
    token: string | undefined,
    private readonly deps: ServerConnectionDeps,
  ) {
    super();
    this.log = deps.log;
    const md = new Metadata();
    md.set(Header.agentId, deps.agentId);
    if (deps.agentIdentifiers) md.set(Header.agentIdentifiers, deps.agentIdentifiers);
    if (token) md.set(Header.authorization, BEARER_PREFIX + token);
    // Offer per-connection flow control; only our server answers it (lib/tunnel/flow-control.ts).
    md.set(FLOW_CONTROL_HEADER, CREDIT_FLOW_V1);

    this.client = new Client(endpoint.target, endpoint.credentials, endpoint.channelOptions);
    this.call = this.client.makeBidiStreamRequest(CONNECT_PATH, encodePacket, decodePacket, md, {});
    this.handshakeDone = new Promise<void>((resolve, reject) => {
      const timeoutMs = deps.handshakeTimeoutMs ?? SERVER_HANDSHAKE_TIMEOUT_MS;
      const timer = setTimeout(() => this.close(`no response headers within ${timeoutMs}ms`), timeoutMs);
      this.handshake = { resolve, reject, timer };
    });
    this.call.once("metadata", (headers) => this.onHeaders(headers));
    // Always listened to: grpc-js emits "error" for every non-OK status, including our cancel.
    this.call.on("error", (err) => this.onStreamError(err));
    this.call.on("status", (s: StatusObject) =>
      this.close(`stream ended: ${status[s.code]} ${s.details}`.trim()),
    );
  }

  /** Dials in flight plus open backend connections. */
  get load(): number {
    return this.dialer?.load ?? 0;
  }

  get isClosed(): boolean {
    return this.closedReason !== null;
  }

  /** Sends DRAIN: the server should route new dials to other agents. Open connections go on. */
  drain(): void {
    this.dialer?.sendDrain();
  }

  close(reason: string, err?: Error): void {
    if (this.closedReason !== null) return;
    this.closedReason = reason;
    clearInterval(this.probe);
    this.dialer?.shutdown();
    this.call.cancel(); // no-op once the status has arrived
    this.client.close();
    if (this.handshake) {
      clearTimeout(this.handshake.timer);
      this.handshake.reject(err ?? new ServerConnectError(reason));
      this.handshake = null;
      return; // never announced, so nothing to report
    }
    this.log.debug({ reason }, "server connection closed");
    this.emit("closed", reason);
  }

  private onHeaders(headers: Metadata): void {
    if (!this.handshake) return;
    const serverId = singleHeader(headers, Header.serverId);
    const countText = singleHeader(headers, Header.serverCount);
    if (!serverId || countText === undefined || !/^\d+$/.test(countText)) {
      const err = new ProtocolError(
        `server must answer with one ${Header.serverId} and one numeric ${Header.serverCount} header`,
      );
      this.close(err.message, err);
      return;
    }
    this.serverId = serverId;
    // Upstream falls back to 1 when a server reports 0.
    this.serverCount = Math.max(1, Number(countText));
    this.log = this.deps.log.child({ serverId });
    const flow = negotiatedFlow(headers.get(FLOW_CONTROL_HEADER));
    this.log.debug({ flow }, "server connection established");
    this.dialer = new BackendDialer(this.call, {
      ...this.deps.dialer,
      flow,
      log: this.log,
      metrics: this.deps.metrics,
    });
    this.dialer.on("load", (load) => this.emit("load", load));
    this.dialer.once("closed", () => this.close("stream closed"));
    this.probe = setInterval(() => this.checkTransport(), this.deps.probeIntervalMs);
    this.probe.unref();
    clearTimeout(this.handshake.timer);
    this.handshake.resolve();
    this.handshake = null;
  }

  private onStreamError(err: Error & { code?: number; details?: string }): void {
    const ours = this.closedReason !== null && err.code === status.CANCELLED;
    if (!ours && !this.handshake) {
      const code = err.code !== undefined ? (status[err.code] ?? String(err.code)) : "Unknown";
      this.deps.metrics.streamErrors.inc({ segment: "to_agent", code, packet_type: "Unknown" });
      this.deps.metrics.serverFailures.inc({ direction: "from_server" });
    }
    const reason = `stream error: ${err.details ?? err.message}`;
    this.close(reason, new ServerConnectError(reason, err.code, { cause: err }));
  }

  /**
   * Upstream's probe: drop a connection whose transport has failed, so a replacement is found
   * without waiting for keepalive. IDLE and CONNECTING are not failures: a server that sent
   * GOAWAY to drain leaves the channel IDLE while our stream keeps working until it ends.
   */
  private checkTransport(): void {
    const state = this.client.getChannel().getConnectivityState(false);
    if (state === connectivityState.TRANSIENT_FAILURE || state === connectivityState.SHUTDOWN) {
      this.close(`transport ${connectivityState[state]}`);
    }
  }
}
