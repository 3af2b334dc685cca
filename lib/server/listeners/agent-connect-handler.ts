/**
 * AgentService.Connect over gRPC: the transport upstream agents speak (and ours, when the server
 * does not offer kgw-tunnel/1), served by our own gRPC server (lib/transport/grpc/server.ts).
 * Admission is shared with the tunnel transport (agent-admission.ts).
 */
import type { IncomingHttpHeaders } from "node:http2";
import type { TLSSocket } from "node:tls";
import { GatewayError, GrpcCode, grpcCodeName, grpcStatusFor } from "../../errors.js";
import type { GrpcMethodHandler } from "../../transport/grpc/server.js";
import { grpcRefusalTrailers } from "../../transport/refusal-details.js";
import { type AgentAdmissionDeps, admitAgent, recordRefusal } from "./agent-admission.js";

/**
 * Every value of one metadata entry. Node joins a repeated header into one string with ", ", as
 * grpc-js and grpc-go split it again; binary (`-bin`) entries are never matched by admission.
 */
export function metadataValues(headers: IncomingHttpHeaders, name: string): string[] {
  const value = headers[name];
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).flatMap((v) => v.split(",").map((part) => part.trim()));
}

export function createAgentConnectHandler(deps: AgentAdmissionDeps): GrpcMethodHandler {
  return (request) => {
    const socket = request.transport as TLSSocket;
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    try {
      const admitted = admitAgent(deps, {
        peer,
        transport: "grpc",
        metadata: (name) => metadataValues(request.headers, name),
        verifiedCertificate: socket.authorized ? socket.getPeerCertificate() : undefined,
      });
      admitted.attach(request.accept(admitted.headers));
    } catch (err) {
      const code = err instanceof GatewayError ? grpcStatusFor(err) : GrpcCode.INTERNAL;
      const message = recordRefusal(deps, peer, code, grpcCodeName(code), err);
      request.refuse(code, message, err instanceof GatewayError ? grpcRefusalTrailers(code, err) : undefined);
    }
  };
}
