/**
 * One forwarded dial, owner's end: a peer call (ProxyService.Proxy on the peer port) carrying
 * exactly one dial, served from this instance's own agents through the gateway's local dialer
 * (policy, quotas and audit of this instance; never forwarded again). The upstream frontend
 * protocol, with one addition: a failed dial's DIAL_RSP carries the typed reason in our
 * extension field (peer-outcome.ts), so the forwarding instance can tell "not here" from every
 * other failure, and report each with the status a single instance would.
 *
 * The dial is the origin's to audit (it writes the one record of a dial, DialContext.origin): the
 * owner tells it which agent took the dial in the DIAL_RSP (our `agent` extension), and names
 * the origin and the dial's id in what it logs of the call.
 *
 * The connection on this call is always connectID 1: the call is its only scope. Nothing is
 * queued: data from the agent goes to the call with its `flushed` callback (credit returns to
 * the agent once HTTP/2 has taken the bytes, which the forwarding instance's stream window
 * bounds), and data from the forwarding instance pauses the call while the agent's side is full.
 */
import { type GatewayError, ProtocolError, toGatewayError } from "../../errors.js";
import type { Logger } from "../../observability/logger.js";
import {
  closeResponse,
  type DialResponsePacket,
  dataPacket,
  dialResponse,
  type Packet,
  PacketType,
} from "../../proto/packet.js";
import type { CallerDialer, DialObserver } from "../../server/core/dial-context.js";
import { peerCloseKind } from "../../transport/peer-close.js";
import type { BackendLink, DialHandle, FrontendEnd } from "../../tunnel/endpoints.js";
import { PacketSink } from "../../tunnel/packet-sink.js";
import type { PacketStream } from "../../tunnel/packet-stream.js";
import { failureOf, isNotHere, tunnelEndFailure } from "./peer-outcome.js";

const CONNECT_ID = 1n;

/** How a served dial ended, for kgw_server_peer_dials_served_total. */
export type ServedOutcome = "established" | "not_here" | "failed" | "cancelled";

type State = "idle" | "dialing" | "open" | "done";

/** Who forwarded the dial, and its id there: for the owner's log lines about it. */
export interface PeerDialIds {
  origin: string;
  dialId?: string | undefined;
}

export class PeerServeSession implements DialObserver {
  private state: State = "idle";
  private random = 0n;
  /** The agent this instance's directory chose, told to the origin in the DIAL_RSP. */
  private agentId: string | undefined;
  private handle: DialHandle | null = null;
  private link: BackendLink | null = null;
  private readonly sink: PacketSink;

  constructor(
    private readonly call: PacketStream,
    private readonly dialer: CallerDialer,
    private readonly served: (outcome: ServedOutcome) => void,
    private readonly log: Logger,
    private readonly ids: PeerDialIds,
  ) {
    this.sink = new PacketSink(call);
    call.on("data", (packet: Packet) => this.onPacket(packet));
    call.on("error", (err: Error) => {
      if (!peerCloseKind(err)) log.debug({ ...ids, err: err.message }, "peer call error");
    });
    call.once("end", () => this.finish(true));
    call.once("close", () => this.finish(false));
  }

  routed(agentId: string): void {
    this.agentId = agentId;
  }

  private onPacket(packet: Packet): void {
    switch (packet.type) {
      case PacketType.DIAL_REQ:
        if (this.state !== "idle") {
          this.protocolError("a peer call carries exactly one dial");
          return;
        }
        this.state = "dialing";
        this.random = packet.random;
        try {
          this.handle = this.dialer(
            { protocol: packet.protocol || "tcp", address: packet.address },
            this.end(),
          );
        } catch (err) {
          this.dialFailed(toGatewayError(err), isNotHere(err));
        }
        return;
      case PacketType.DATA: {
        const link = this.link;
        if (this.state !== "open" || packet.connectId !== CONNECT_ID || !link) return;
        if (!link.send(packet.data)) {
          this.call.pause();
          link.onceWritable(() => this.call.resume());
        }
        return;
      }
      case PacketType.CLOSE_REQ:
        if (this.state !== "open" || packet.connectId !== CONNECT_ID) return;
        this.state = "done";
        this.link?.close();
        this.sink.send(closeResponse(CONNECT_ID));
        this.call.end();
        return;
      case PacketType.DIAL_CLS:
        if (this.state !== "dialing" || packet.random !== this.random) return;
        this.state = "done";
        this.served("cancelled");
        this.handle?.cancel();
        this.call.end();
        return;
      default:
        this.protocolError(`unexpected packet type ${String(packet.type)} on a peer call`);
    }
  }

  private end(): FrontendEnd {
    return {
      established: (link) => {
        if (this.state !== "dialing") {
          link.close(); // cancelled while the answer was on its way
          return;
        }
        this.state = "open";
        this.link = link;
        this.served("established");
        this.sink.send(this.withAgent(dialResponse(this.random, CONNECT_ID)));
      },
      dialFailed: (err) => this.dialFailed(err, false),
      deliver: (data, flushed) => this.sink.send(dataPacket(CONNECT_ID, data), flushed),
      onceWritable: (cb) => this.sink.onceWritable(cb),
      closed: (err) => {
        if (this.state !== "open") return;
        this.state = "done";
        // With an error the tunnel broke (its agent went away) or a drain cut it: the forwarding
        // instance breaks its caller's tunnel in turn, never ends it cleanly, and audits it by
        // the code (tunnelEndFailure).
        this.sink.send(closeResponse(CONNECT_ID, err?.message ?? "", tunnelEndFailure(err)));
        this.call.end();
      },
    };
  }

  private dialFailed(err: GatewayError, notHere: boolean): void {
    if (this.state !== "dialing") return;
    this.state = "done";
    this.served(notHere ? "not_here" : "failed");
    this.sink.send(
      this.withAgent({ ...dialResponse(this.random, 0n, err.message), failure: failureOf(err, notHere) }),
    );
    this.call.end();
  }

  private protocolError(message: string): void {
    this.log.warn({ ...this.ids, reason: message }, "closing a peer call that broke the protocol");
    this.finish(false);
    const err = new ProtocolError(message);
    if (this.call.fail) this.call.fail(err);
    else this.call.destroy(err);
  }

  private withAgent(packet: DialResponsePacket): DialResponsePacket {
    return this.agentId === undefined ? packet : { ...packet, agent: this.agentId };
  }

  /** The forwarding instance ended the call (`graceful`) or it broke: release what it held. */
  private finish(graceful: boolean): void {
    const was = this.state;
    this.state = "done";
    if (was === "dialing") {
      this.served("cancelled");
      this.handle?.cancel();
    } else if (was === "open") {
      this.link?.close();
    }
    if (graceful && !this.call.writableEnded) this.call.end();
  }
}
