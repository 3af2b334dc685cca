/**
 * Raw gRPC clients speaking the tunnel protocol packet by packet, for tests that need to act as
 * a frontend or an agent and control every packet (including bad ones).
 */
import {
  type ChannelCredentials,
  Client,
  type ClientDuplexStream,
  credentials,
  Metadata,
} from "@grpc/grpc-js";
import { decodePacket, encodePacket } from "../../lib/proto/codec.js";
import type { Packet } from "../../lib/proto/packet.js";
import type { TestPki } from "./pki.js";

export type PacketCall = ClientDuplexStream<Packet, Packet>;

export function tlsCredentials(
  pki: TestPki,
  who: "agent" | "frontend" | "other" | "none",
): ChannelCredentials {
  const ca = Buffer.from(pki.ca.certPem);
  if (who === "none") return credentials.createSsl(ca);
  const id = who === "agent" ? pki.agent : who === "frontend" ? pki.frontend : pki.otherClient;
  return credentials.createSsl(ca, Buffer.from(id.keyPem), Buffer.from(id.certPem));
}

export class RawClient {
  readonly client: Client;

  constructor(target: string, creds: ChannelCredentials) {
    this.client = new Client(target, creds, { "grpc.use_local_subchannel_pool": 1 });
  }

  proxy(): PacketCall {
    return this.client.makeBidiStreamRequest(
      "/ProxyService/Proxy",
      encodePacket,
      decodePacket,
      new Metadata(),
    );
  }

  connect(md: Record<string, string | string[]>): PacketCall {
    const metadata = new Metadata();
    for (const [k, v] of Object.entries(md)) for (const value of [v].flat()) metadata.add(k, value);
    return this.client.makeBidiStreamRequest("/AgentService/Connect", encodePacket, decodePacket, metadata);
  }

  /** An agent stream that sends raw bytes, for packets our codec would refuse to encode. */
  connectRaw(md: Record<string, string>): ClientDuplexStream<Buffer, Packet> {
    const metadata = new Metadata();
    for (const [k, v] of Object.entries(md)) metadata.add(k, v);
    return this.client.makeBidiStreamRequest(
      "/AgentService/Connect",
      (b: Buffer) => b,
      decodePacket,
      metadata,
    );
  }

  close(): void {
    this.client.close();
  }
}

/**
 * Resolves with the response headers of an accepted call, or rejects with its error status. A
 * refused call also delivers (trailers-only) metadata, so acceptance waits for a header the
 * server sends only on success when `requiredHeader` is given.
 */
export function responseHeaders(call: NodeJS.EventEmitter, requiredHeader = "serverid"): Promise<Metadata> {
  return new Promise((resolve, reject) => {
    call.once("error", reject);
    call.once("metadata", (md: Metadata) => {
      if (md.get(requiredHeader).length > 0) resolve(md);
    });
  });
}
