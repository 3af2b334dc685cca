/**
 * gRPC service definitions for the two tunnel services, wired to our hand-written codec instead
 * of a generated one. Paths have no package prefix, exactly as upstream.
 */
import type { MethodDefinition, ServiceDefinition } from "@grpc/grpc-js";
import { decodePacket, encodePacket } from "../../proto/codec.js";
import type { Packet } from "../../proto/packet.js";

function bidi(path: string, originalName: string): MethodDefinition<Packet, Packet> {
  return {
    path,
    originalName,
    requestStream: true,
    responseStream: true,
    requestSerialize: encodePacket,
    requestDeserialize: decodePacket,
    responseSerialize: encodePacket,
    responseDeserialize: decodePacket,
  };
}

export const PROXY_SERVICE: ServiceDefinition = { proxy: bidi("/ProxyService/Proxy", "Proxy") };
export const AGENT_SERVICE: ServiceDefinition = { connect: bidi("/AgentService/Connect", "Connect") };
