/**
 * The server's side of one agent stream (AgentService.Connect).
 *
 * Owns every dial and connection that rides this stream. The agent assigns connectIDs; dial
 * randoms towards the agent are assigned here, so callers' randoms never reach the agent and
 * two callers can never collide. Invariants:
 *  - a pending dial ends exactly once: answered, timed out, cancelled, or failed because the
 *    agent went away (at once, not after a timeout);
 *  - every established connection is kept (agent-connections.ts) until the agent confirms its
 *    close, or the stream ends; nothing is kept after the stream ends;
 *  - nothing is queued here. With an upstream agent, data for a connection whose caller is
 *    backed up pauses reading this stream (the protocol has no per-connection flow control).
 *    With our agent (credit mode, see lib/tunnel/flow-control.ts) the stream is never paused:
 *    the agent sends at most a window of unconsumed bytes per connection.
 */
import { EventEmitter } from "node:events";
import {
  AgentGoneError,
  AgentUnresponsiveError,
  agentDialError,
  DialFailedError,
  DialTimeoutError,
  DrainedError,
  type GatewayError,
  ProtocolError,
} from "../../errors.js";
import type { DialFailureReason } from "../../metrics/server-metrics.js";
import {
  closeDial,
  closeRequest,
  dialRequest,
  drain,
  type Packet,
  PacketType,
  packetTypeName,
  serverCountUpdate,
} from "../../proto/packet.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import type { WindowBudget } from "../../tunnel/flow-control.js";
import { PacketSink } from "../../tunnel/packet-sink.js";
import type { PacketStream } from "../../tunnel/packet-stream.js";
import { PauseLatch } from "../../tunnel/pause-latch.js";
import { AgentConnections } from "./agent-connections.js";
import { AgentLiveness } from "./agent-liveness.js";
import type { AgentInfo, AgentSessionOptions } from "./agent-session-options.js";

export type { AgentInfo, AgentSessionOptions } from "./agent-session-options.js";

import type { DialContext } from "./dial-context.js";

interface PendingDial {
  random: bigint;
  frontend: FrontendEnd;
  timer: NodeJS.Timeout | undefined;
  startedAt: bigint;
  address: string;
  /** Who asked, for the log line of an established dial. */
  caller: string;
  /** The tenant's budget the connection's window grows from (DialContext.windowBudget). */
  windowBudget: WindowBudget | undefined;
}

export class AgentSession extends EventEmitter<{
  closed: [err: GatewayError];
  responsive: [responsive: boolean];
}> {
  draining = false;
  private drainAdvised = false;
  /** The serverCount last told an agent that asked for updates; null when it did not. */
  private announcedServerCount: number | null;
  private nextRandom = 1n;
  private readonly pending = new Map<bigint, PendingDial>();
  private readonly connections: AgentConnections;
  private readonly sink: PacketSink;
  private ended: GatewayError | null = null;
  private readonly liveness: AgentLiveness;

  constructor(
    private readonly stream: PacketStream,
    readonly info: AgentInfo,
    private readonly opts: AgentSessionOptions,
  ) {
    super();
    this.announcedServerCount = opts.serverCountUpdates?.announced ?? null;
    this.sink = new PacketSink(stream);
    this.connections = new AgentConnections({
      send: (packet) => this.send(packet),
      onceWritable: (cb) => this.sink.onceWritable(cb),
      readLatch: new PauseLatch(stream),
      flow: opts.flow,
      log: opts.log,
      metrics: opts.metrics,
    });
    this.liveness = new AgentLiveness(opts.liveness, {
      probe: (answered) => stream.probe?.(answered),
      onResponsiveChange: (responsive) => {
        if (responsive) opts.log.info("agent answers again; new dials may use it");
        else {
          opts.log.warn({ load: this.load }, "agent stopped answering; new dials avoid it");
          this.abandonPendingDials();
        }
        this.emit("responsive", responsive);
      },
      onDead: (silentMs) => {
        opts.log.warn({ silentMs, load: this.load }, "agent silent too long; closing its stream");
        this.close(new AgentUnresponsiveError(this.info.agentId, silentMs, true));
      },
    });
    stream.on("data", (packet: Packet) => this.onPacket(packet));
    stream.on("error", (err: Error) => {
      opts.log.debug({ err }, "agent stream error");
    });
    stream.once("end", () => {
      // The agent half-closed: it is done with us. Finish our side too so the call completes.
      this.shutdown();
      if (!stream.writableEnded) stream.end();
    });
    stream.once("close", () => this.shutdown());
  }

  get isClosed(): boolean {
    return this.ended !== null;
  }

  /** False while the agent is not answering probes (agent-liveness.ts): no new dials for it. */
  get responsive(): boolean {
    return this.liveness.responsive;
  }

  /** When anything was last heard from the agent (ms since the epoch), for the status API. */
  get lastHeardAt(): number {
    return this.liveness.lastHeardAt;
  }

  /** Number of dials in flight and connections open: what the agent is carrying for us. */
  get load(): number {
    return this.pending.size + this.connections.size;
  }

  dial(req: DialRequest, frontend: FrontendEnd, ctx?: DialContext): DialHandle {
    if (this.ended) throw this.ended;
    const random = this.nextRandom++;
    const pending: PendingDial = {
      random,
      frontend,
      timer: undefined,
      startedAt: process.hrtime.bigint(),
      address: req.address,
      caller: ctx?.caller.principal ?? "",
      windowBudget: ctx?.windowBudget,
    };
    if (this.opts.dialTimeoutMs > 0) {
      pending.timer = setTimeout(() => this.dialTimedOut(random), this.opts.dialTimeoutMs);
    }
    this.pending.set(random, pending);
    this.opts.metrics.pendingDials.inc();
    // A DIAL_REQ is tiny and must not wait behind a paused producer; backpressure on the agent
    // stream is applied to the data producers instead.
    this.send(dialRequest(req.address, random, req.protocol, this.opts.egress ? req.egress : undefined));
    this.liveness.dialSent();
    return { cancel: () => this.cancelDial(random) };
  }

  /**
   * This server is shutting down: tells an agent that negotiated drain advice to move to another
   * server (make-before-break). Its open connections go on. Sent once; false when not sent.
   */
  adviseDrain(): boolean {
    if (!this.opts.drainAdvice || this.drainAdvised || this.ended) return false;
    this.drainAdvised = true;
    this.send(drain());
    return true;
  }

  /** serverCount changed: tells an agent that asked (lib/tunnel/server-count-updates.ts), once. */
  announceServerCount(count: number): void {
    if (this.announcedServerCount === null || this.ended || this.announcedServerCount === count) return;
    this.announcedServerCount = count;
    this.send(serverCountUpdate(count));
  }

  /** Ends the stream; every dial and connection fails with `err`. */
  close(err: GatewayError = new AgentGoneError(this.info.agentId)): void {
    this.shutdown(err);
    this.stream.destroy();
  }

  private agentEnded(): GatewayError {
    return this.draining
      ? new DrainedError(`agent ${this.info.agentId} drained (it sent DRAIN, then ended its stream)`)
      : new AgentGoneError(this.info.agentId);
  }

  private send(packet: Packet): boolean {
    this.opts.metrics.streamPackets.count("to_agent", packet);
    return this.sink.send(packet);
  }

  private onPacket(packet: Packet): void {
    this.liveness.heard();
    this.opts.metrics.streamPackets.count("from_agent", packet);
    switch (packet.type) {
      case PacketType.DIAL_RSP:
        this.onDialResponse(packet.random, packet.connectId, packet.error);
        return;
      case PacketType.DATA:
        this.connections.onData(packet.connectId, packet.data);
        return;
      case PacketType.CLOSE_RSP:
        this.connections.onCloseResponse(packet.connectId, packet.error);
        return;
      case PacketType.DIAL_CLS:
        // The agent gave up on a dial before answering it (upstream: backend closed early).
        this.failPending(packet.random, new DialFailedError("agent closed the dial"), "backend_close");
        return;
      case PacketType.DRAIN:
        if (!this.draining) this.opts.log.info("agent is draining; new dials prefer other agents");
        this.draining = true;
        return;
      case PacketType.KGW_CREDIT:
        // Unknown connection: closed while the credit was in flight. Nothing to do.
        this.connections.replenish(packet.connectId, Number(packet.bytes));
        return;
      default:
        // DIAL_REQ, CLOSE_REQ and unknown types are not valid from an agent. Upstream logs and
        // carries on; so do we, since dropping the stream would hurt every connection on it.
        this.opts.log.warn({ packetType: packetTypeName(packet) }, "ignoring unexpected packet from agent");
    }
  }

  private onDialResponse(random: bigint, connectId: bigint, error: string): void {
    const pending = this.pending.get(random);
    if (!pending) {
      this.opts.metrics.dialFailures.inc({ reason: "unrecognized_response" });
      // Typically a dial we cancelled or timed out whose answer crossed our DIAL_CLS: close the
      // orphan so it does not linger on the agent.
      if (!error && connectId !== 0n) this.send(closeRequest(connectId));
      return;
    }
    this.endPending(pending);
    if (error) {
      this.opts.metrics.dialFailures.inc({ reason: "error_response" });
      pending.frontend.dialFailed(agentDialError(error));
      return;
    }
    if (this.connections.has(connectId)) {
      this.opts.metrics.dialFailures.inc({ reason: "error_response" });
      pending.frontend.dialFailed(new ProtocolError(`agent reused connectID ${connectId}`));
      return;
    }
    const dialSeconds = Number(process.hrtime.bigint() - pending.startedAt) / 1e9;
    this.opts.metrics.dialDuration.observe(dialSeconds);
    this.opts.log.debug(
      {
        connectId: String(connectId),
        address: pending.address,
        caller: pending.caller,
        dialMs: Math.round(dialSeconds * 1e4) / 10,
      },
      "dial established",
    );
    this.connections.open(connectId, pending.frontend, pending.windowBudget);
  }

  private cancelDial(random: bigint): void {
    const pending = this.pending.get(random);
    if (!pending) return;
    this.endPending(pending);
    this.opts.metrics.dialFailures.inc({ reason: "frontend_close" });
    this.send(closeDial(random));
  }

  /**
   * The agent stopped answering: its pending dials fail now (503) instead of at their timeout.
   * DIAL_CLS goes out so that an agent which wakes up does not dial for nobody. Established
   * connections stay: the agent may only be paused.
   */
  private abandonPendingDials(): void {
    if (this.pending.size === 0) return;
    const err = new AgentUnresponsiveError(this.info.agentId, this.liveness.silentMs, false);
    for (const pending of [...this.pending.values()]) {
      this.send(closeDial(pending.random));
      this.failPending(pending.random, err, "backend_dial_timeout");
    }
  }

  private dialTimedOut(random: bigint): void {
    const pending = this.pending.get(random);
    if (!pending) return;
    // The session's log names the tenant and agent; the caller's credential is the dial's.
    this.opts.log.info(
      { address: pending.address, principal: pending.caller, timeoutMs: this.opts.dialTimeoutMs },
      "dial timed out",
    );
    this.send(closeDial(random));
    this.failPending(random, new DialTimeoutError(this.opts.dialTimeoutMs), "backend_dial_timeout");
  }

  private failPending(random: bigint, err: GatewayError, reason: DialFailureReason): void {
    const pending = this.pending.get(random);
    if (!pending) return;
    this.endPending(pending);
    this.opts.metrics.dialFailures.inc({ reason });
    pending.frontend.dialFailed(err);
  }

  private endPending(pending: PendingDial): void {
    this.pending.delete(pending.random);
    if (pending.timer) clearTimeout(pending.timer);
    this.opts.metrics.pendingDials.dec();
  }

  /**
   * The stream is over. Without a reason it ended from the agent's side: a drain when the agent
   * had said DRAIN first (its rollout), otherwise the agent is gone.
   */
  private shutdown(err: GatewayError = this.agentEnded()): void {
    if (this.ended) return;
    this.ended = err;
    this.liveness.stop();
    // Fail everything at once: callers learn immediately instead of waiting for timeouts.
    for (const pending of [...this.pending.values()]) {
      this.endPending(pending);
      this.opts.metrics.dialFailures.inc({ reason: "backend_close" });
      pending.frontend.dialFailed(err);
    }
    this.connections.closeAll(err);
    this.emit("closed", err);
  }
}
