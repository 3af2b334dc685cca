/**
 * The established connections of one agent stream (AgentSession): each from the agent's
 * DIAL_RSP until the agent confirms its close (CLOSE_RSP) or the stream ends. Data both ways,
 * the close handshake, and backpressure: with our agent (credit mode, lib/tunnel/flow-control.ts)
 * a window of unconsumed bytes per connection; with an upstream agent, a caller backed up pauses
 * reading the whole stream (`readLatch`), since the protocol has no per-connection flow control.
 */
import { DialFailedError, type GatewayError, ProtocolError } from "../../errors.js";
import { closeRequest, credit, dataPacket, type Packet } from "../../proto/packet.js";
import { CLOSE_ACK_TIMEOUT_MS } from "../../tunnel/durations.js";
import type { BackendLink, FrontendEnd } from "../../tunnel/endpoints.js";
import { ConnectionCredit, OPEN_WINDOW_AFTER_BYTES, type WindowBudget } from "../../tunnel/flow-control.js";
import type { PauseLatch } from "../../tunnel/pause-latch.js";
import type { AgentSessionOptions } from "./agent-session-options.js";

export interface AgentConnectionsDeps extends Pick<AgentSessionOptions, "flow" | "log" | "metrics"> {
  /** Sends a packet on the agent stream (the session counts it). */
  send(packet: Packet): boolean;
  /** Calls `cb` once the agent stream takes writes again. */
  onceWritable(cb: () => void): void;
  /** Pauses reading the agent stream while a caller is backed up (upstream agents only). */
  readLatch: PauseLatch;
}

interface Connection {
  connectId: bigint;
  frontend: FrontendEnd;
  /** Set once the caller closed; we are waiting for the agent's CLOSE_RSP. */
  closing: NodeJS.Timeout | undefined;
  establishedAt: number;
  /** Set in credit mode only. */
  credit: ConnectionCredit | undefined;
}

export class AgentConnections {
  private readonly conns = new Map<bigint, Connection>();

  constructor(private readonly deps: AgentConnectionsDeps) {}

  get size(): number {
    return this.conns.size;
  }

  has(connectId: bigint): boolean {
    return this.conns.has(connectId);
  }

  /** The agent answered a dial with `connectId`: the connection is open to `frontend`. */
  open(connectId: bigint, frontend: FrontendEnd, windowBudget: WindowBudget | undefined): void {
    const conn: Connection = {
      connectId,
      frontend,
      closing: undefined,
      establishedAt: Date.now(),
      credit: undefined,
    };
    if (this.deps.flow === "credit") {
      conn.credit = new ConnectionCredit(
        (bytes) => {
          if (!conn.closing && this.conns.get(connectId) === conn) this.deps.send(credit(connectId, bytes));
        },
        { budget: windowBudget, openAfterBytes: OPEN_WINDOW_AFTER_BYTES },
      );
    }
    this.conns.set(connectId, conn);
    this.deps.metrics.establishedConnections.inc();
    frontend.established(this.linkFor(conn));
    conn.credit?.openWindow();
  }

  /** The agent returned `bytes` of credit; an unknown connection was closed while it was in flight. */
  replenish(connectId: bigint, bytes: number): void {
    this.conns.get(connectId)?.credit?.replenish(bytes);
  }

  /** The stream ended: every connection is closed with `err` (unless its caller closed it). */
  closeAll(err: GatewayError): void {
    for (const conn of [...this.conns.values()]) {
      this.forget(conn);
      if (!conn.closing) conn.frontend.closed(err);
    }
  }

  private linkFor(conn: Connection): BackendLink {
    const credit = conn.credit;
    return {
      send: (data) => {
        if (conn.closing || this.conns.get(conn.connectId) !== conn) return true; // dropped: gone
        this.deps.metrics.tunnelBytes.add(this.deps.metrics.bytesToAgent, data.byteLength);
        if (!credit) return this.deps.send(dataPacket(conn.connectId, data));
        // Parts may be sent later, as credit returns; by then the connection may be gone.
        return credit.write(data, (part) =>
          conn.closing || this.conns.get(conn.connectId) !== conn
            ? true
            : this.deps.send(dataPacket(conn.connectId, part)),
        );
      },
      onceWritable: credit
        ? (cb) => credit.onceCredit(() => this.deps.onceWritable(cb))
        : (cb) => this.deps.onceWritable(cb),
      close: () => this.closeFromFrontend(conn),
    };
  }

  /** DATA from the agent: to the caller, within its window or pausing the stream. */
  onData(connectId: bigint, data: Uint8Array): void {
    const conn = this.conns.get(connectId);
    if (!conn) {
      // Upstream answers data for an unknown connection with CLOSE_REQ so the agent cleans up.
      this.deps.send(closeRequest(connectId));
      return;
    }
    if (conn.closing) return; // in flight when the caller closed; CLOSE_RSP is on its way
    this.deps.metrics.tunnelBytes.add(this.deps.metrics.bytesToClient, data.byteLength);
    const credit = conn.credit;
    if (credit) {
      const n = data.byteLength;
      if (!credit.received(n)) {
        this.deps.log.warn(
          { connectId: String(connectId) },
          "agent overran the connection window; closing it",
        );
        this.closeFromFrontend(conn);
        conn.frontend.closed(new ProtocolError("agent sent past its flow-control window"));
        return;
      }
      conn.frontend.deliver(data, () => credit.released(n));
      return;
    }
    if (!conn.frontend.deliver(data)) {
      this.deps.readLatch.block(conn);
      conn.frontend.onceWritable(() => this.deps.readLatch.unblock(conn));
    }
  }

  /** CLOSE_RSP: the agent closed the connection (with `error`: broken off) or confirmed our close. */
  onCloseResponse(connectId: bigint, error: string): void {
    const conn = this.conns.get(connectId);
    if (!conn) return; // already forgotten (close-ack timeout); nothing to do
    this.forget(conn);
    if (!conn.closing) conn.frontend.closed(error ? new DialFailedError(error) : undefined);
  }

  private closeFromFrontend(conn: Connection): void {
    if (conn.closing || this.conns.get(conn.connectId) !== conn) return;
    this.deps.readLatch.unblock(conn);
    conn.closing = setTimeout(() => {
      if (this.conns.get(conn.connectId) === conn) this.forget(conn);
    }, CLOSE_ACK_TIMEOUT_MS);
    conn.closing.unref();
    this.deps.send(closeRequest(conn.connectId));
  }

  private forget(conn: Connection): void {
    this.conns.delete(conn.connectId);
    conn.credit?.cancel();
    if (conn.closing) clearTimeout(conn.closing);
    this.deps.readLatch.unblock(conn);
    this.deps.metrics.establishedConnections.dec();
    this.deps.metrics.connectionDuration.observe((Date.now() - conn.establishedAt) / 1000);
  }
}
