/**
 * AgentService.Connect over gRPC: the transport upstream agents speak (and ours, when the server
 * does not offer kgw-tunnel/1). Admission is shared with the tunnel transport (agent-admission.ts).
 */
import { Metadata, type ServerDuplexStream, status } from "@grpc/grpc-js";
import { GatewayError, grpcStatusFor } from "../errors.js";
import type { Packet } from "../proto/packet.js";
import { type AgentAdmissionDeps, admitAgent, recordRefusal } from "./agent-admission.js";

export function createAgentConnectHandler(deps: AgentAdmissionDeps) {
  return (call: ServerDuplexStream<Packet, Packet>): void => {
    const peer = call.getPeer();
    try {
      const admitted = admitAgent(deps, {
        peer,
        transport: "grpc",
        metadata: (name) => call.metadata.get(name),
        verifiedCertificate: call.getAuthContext().sslPeerCertificate,
      });
      const headers = new Metadata();
      for (const [name, values] of Object.entries(admitted.headers)) {
        for (const v of values) headers.add(name, v);
      }
      call.sendMetadata(headers);
      admitted.attach(call);
    } catch (err) {
      const code = err instanceof GatewayError ? grpcStatusFor(err) : status.INTERNAL;
      const details = recordRefusal(deps, peer, code, status[code] ?? String(code), err);
      call.emit("error", { code, details });
    }
  };
}
