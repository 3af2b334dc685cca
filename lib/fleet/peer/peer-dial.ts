/**
 * One forwarded dial, client end: the caller's FrontendEnd on this instance bridged to one peer
 * call on the owner, one dial per call (so a tunnel is one HTTP/2 stream and has that stream's
 * flow control to itself). Invariants:
 *
 *  - the caller hears exactly one of established/dialFailed, and after established exactly one
 *    closed, unless it cancelled or closed first;
 *  - a tunnel ends cleanly only on the owner's CLOSE_RSP without error. A call that ends any
 *    other way once established (the owner's CLOSE_RSP with error, a reset, the link lost, the
 *    owner gone) is a broken tunnel (ConnectionBrokenError): a caller must never take a
 *    truncated transfer for a whole one. One exception in the audit only: a CLOSE_RSP whose
 *    `failure` says ERR_DRAINED (a drain cut it at the owner) ends it with DrainedError;
 *  - nothing is queued here: data from the owner is handed to the caller at once, and the call
 *    stops reading (HTTP/2 then holds the owner back) while more than PEER_DELIVER_HIGH_WATER
 *    bytes have not left the caller's buffers; data from the caller goes to the call, whose
 *    backpressure the caller sees through `send`/`onceWritable`.
 */
import {
  ConnectionBrokenError,
  DialTimeoutError,
  type GatewayError,
  PeerNotHereError,
  PeerUnavailableError,
} from "../../errors.js";
import {
  closeDial,
  closeRequest,
  dataPacket,
  dialRequest,
  type Packet,
  PacketType,
} from "../../proto/packet.js";
import type { CallStatus } from "../../transport/grpc/client-call-stream.js";
import { CLOSE_ACK_TIMEOUT_MS } from "../../tunnel/durations.js";
import type { BackendLink, DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import type { PacketStream } from "../../tunnel/packet-stream.js";
import { peerDialFailure, peerTunnelEnd } from "./peer-outcome.js";

/**
 * Bytes handed to the caller and not yet flushed past which the call stops reading, and half of
 * which it resumes at: enough to keep a fast caller busy between two reads, small next to the
 * stream window that HTTP/2 holds for a stalled one.
 */
export const PEER_DELIVER_HIGH_WATER_BYTES = 1024 * 1024;
const PEER_DELIVER_LOW_WATER_BYTES = PEER_DELIVER_HIGH_WATER_BYTES / 2;

/** The dial's random on its call: one dial per call, so any fixed value is unique there. */
const RANDOM = 1n;

/** How a forwarded dial ended, for kgw_server_peer_dials_total. */
export type PeerDialOutcome = "established" | "not_here" | "unavailable" | "failed" | "cancelled" | "timeout";

/** What a PeerDial needs of its call beyond packets: the owner's status, and whether it reset. */
export interface PeerCall extends PacketStream {
  readonly status: CallStatus | null;
}

export interface PeerDialOptions {
  /** Instance id of the owner, for errors. */
  peer: string;
  dialTimeoutMs: number;
  /** Why the link under the call is gone, if it is (the session closed, GOAWAY...). */
  linkLost(): string | null;
  /** Told once how the dial ended. */
  outcome(outcome: PeerDialOutcome): void;
  /** Told which agent the owner chose, when its DIAL_RSP names one (for the audit record). */
  answeredBy?(agentId: string): void;
}

type State = "dialing" | "open" | "closing" | "done";

export class PeerDial implements DialHandle {
  private state: State = "dialing";
  private connectId = 0n;
  private timer: NodeJS.Timeout | undefined;
  private closeTimer: NodeJS.Timeout | undefined;
  private unflushed = 0;
  private pausedForCaller = false;

  constructor(
    private readonly call: PeerCall,
    private readonly frontend: FrontendEnd,
    private readonly opts: PeerDialOptions,
  ) {
    call.on("data", (packet: Packet) => this.onPacket(packet));
    call.on("error", () => {}); // the end of the call says what happened; see `ended`
    call.once("end", () => this.ended());
    call.once("close", () => this.ended());
  }

  /** Sends the DIAL_REQ; the dial timer starts now. */
  start(req: DialRequest): void {
    // The owner's authorizer attaches its own egress policy: ours is not forwarded.
    this.call.write(dialRequest(req.address, RANDOM, req.protocol));
    if (this.opts.dialTimeoutMs > 0) {
      this.timer = setTimeout(() => this.timedOut(), this.opts.dialTimeoutMs);
    }
  }

  /** The caller gave up before the answer: DIAL_CLS tells the owner to cancel at its agent. */
  cancel(): void {
    if (this.state !== "dialing") return;
    this.finish("cancelled");
    this.call.write(closeDial(RANDOM));
    this.call.end();
  }

  private timedOut(): void {
    if (this.state !== "dialing") return;
    this.finish("timeout");
    this.call.write(closeDial(RANDOM));
    this.call.end();
    this.frontend.dialFailed(new DialTimeoutError(this.opts.dialTimeoutMs));
  }

  private onPacket(packet: Packet): void {
    switch (packet.type) {
      case PacketType.DIAL_RSP:
        if (this.state !== "dialing" || packet.random !== RANDOM) return;
        if (packet.agent !== undefined) this.opts.answeredBy?.(packet.agent);
        if (packet.error !== "" || packet.connectId === 0n) {
          const err = peerDialFailure(this.opts.peer, packet.error, packet.failure);
          this.finish(err instanceof PeerUnavailableError ? "unavailable" : outcomeOf(err));
          this.call.end();
          this.frontend.dialFailed(err);
          return;
        }
        this.clearTimer();
        this.state = "open";
        this.connectId = packet.connectId;
        this.opts.outcome("established");
        this.frontend.established(this.link());
        return;
      case PacketType.DATA:
        if (this.state === "open" && packet.connectId === this.connectId) this.deliver(packet.data);
        return;
      case PacketType.CLOSE_RSP: {
        if (packet.connectId !== this.connectId) return;
        const was = this.state;
        if (was !== "open" && was !== "closing") return;
        this.finish(null);
        this.call.end();
        if (was === "open") {
          this.frontend.closed(peerTunnelEnd(this.opts.peer, packet.error, packet.failure));
        }
        return;
      }
      default:
      // Nothing else is valid from an owner on a one-dial call; ignored, as upstream does.
    }
  }

  private deliver(data: Uint8Array): void {
    const n = data.byteLength;
    this.unflushed += n;
    this.frontend.deliver(data, () => {
      this.unflushed -= n;
      if (this.pausedForCaller && this.unflushed <= PEER_DELIVER_LOW_WATER_BYTES) {
        this.pausedForCaller = false;
        this.call.resume();
      }
    });
    if (!this.pausedForCaller && this.unflushed >= PEER_DELIVER_HIGH_WATER_BYTES) {
      this.pausedForCaller = true;
      this.call.pause();
    }
  }

  private link(): BackendLink {
    return {
      send: (data) => {
        if (this.state !== "open") return true; // closing: dropped, as an agent session does
        return this.call.write(dataPacket(this.connectId, data));
      },
      onceWritable: (cb) => {
        if (this.state !== "open" || !this.call.writableNeedDrain) queueMicrotask(cb);
        else this.call.once("drain", cb);
      },
      close: () => {
        if (this.state !== "open") return;
        this.state = "closing";
        this.call.write(closeRequest(this.connectId));
        // The owner answers CLOSE_RSP and ends the call; one that does not is not kept waiting on.
        this.closeTimer = setTimeout(() => {
          if (this.state === "closing") this.finish(null);
          this.call.destroy();
        }, CLOSE_ACK_TIMEOUT_MS);
        this.closeTimer.unref();
      },
    };
  }

  /** The call ended (either side, or the link) without the packet that would have ended it. */
  private ended(): void {
    const was = this.state;
    if (was === "done") return;
    if (was === "closing") {
      this.finish(null);
      return;
    }
    const lost = this.opts.linkLost();
    const status = this.call.status;
    if (was === "dialing") {
      this.finish("unavailable");
      const why = lost ?? (status ? `the call ended with status ${status.code}: ${status.message}` : null);
      this.frontend.dialFailed(
        new PeerUnavailableError(this.opts.peer, why ?? "the call ended before the dial was answered"),
      );
      return;
    }
    this.finish(null);
    this.call.destroy();
    this.frontend.closed(
      new ConnectionBrokenError(
        `the tunnel through peer instance ${this.opts.peer} broke: ${lost ?? "the call ended without a close"}`,
      ),
    );
  }

  private finish(outcome: PeerDialOutcome | null): void {
    this.state = "done";
    this.clearTimer();
    if (this.closeTimer) clearTimeout(this.closeTimer);
    if (this.pausedForCaller) {
      this.pausedForCaller = false;
      this.call.resume(); // whatever still arrives is read and dropped
    }
    if (outcome !== null) this.opts.outcome(outcome);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function outcomeOf(err: GatewayError): PeerDialOutcome {
  if (err instanceof PeerNotHereError) return "not_here";
  if (err.code === "ERR_DIAL_TIMEOUT") return "timeout";
  return "failed";
}
