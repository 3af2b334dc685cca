/**
 * AgentService over kgw-tunnel/1 (lib/proto/tunnel-frames.ts): the transport our own agents
 * choose by ALPN. Same admission as gRPC (agent-admission.ts); the session then runs on a
 * FramedPacketStream instead of a gRPC call.
 *
 * Everything before WELCOME is unauthenticated input: the first frame must arrive within the
 * handshake timeout and within MAX_HANDSHAKE_FRAME_BYTES, and anything else gets a REFUSED frame
 * with the gRPC status code the same mistake would get on gRPC, then the connection is closed.
 */
import type { TLSSocket } from "node:tls";
import { GatewayError, GrpcCode, grpcCodeName, grpcStatusFor } from "../../errors.js";
import { FrameDecoder } from "../../proto/tunnel-frames.js";
import { FramedPacketStream } from "../../transport/framed-packet-stream.js";
import { dialErrorText } from "../../transport/refusal-details.js";
import {
  encodeRefused,
  encodeWelcome,
  headerValues,
  parseHello,
  readHandshakeFrame,
} from "../../transport/tunnel-handshake.js";
import { REFUSED_LINGER_MS } from "../durations.js";
import { type AgentAdmissionDeps, admitAgent, recordRefusal } from "./agent-admission.js";

export interface AgentTunnelOptions {
  handshakeTimeoutMs: number;
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
}

export function createAgentTunnelHandler(deps: AgentAdmissionDeps, opts: AgentTunnelOptions) {
  return async (socket: TLSSocket): Promise<void> => {
    const peer = `${socket.remoteAddress}:${socket.remotePort}`;
    const decoder = new FrameDecoder();
    try {
      const hello = parseHello(await readHandshakeFrame(socket, decoder, opts.handshakeTimeoutMs));
      const admitted = admitAgent(deps, {
        peer,
        transport: "tunnel",
        metadata: (name) => headerValues(hello, name),
        verifiedCertificate: socket.authorized ? socket.getPeerCertificate() : undefined,
        creditRequired: true,
      });
      socket.write(encodeWelcome(admitted.headers));
      admitted.attach(
        new FramedPacketStream(socket, decoder, {
          keepaliveMs: opts.keepaliveMs,
          keepaliveTimeoutMs: opts.keepaliveTimeoutMs,
        }),
      );
    } catch (err) {
      const code = err instanceof GatewayError ? grpcStatusFor(err) : GrpcCode.INTERNAL;
      const details = recordRefusal(deps, peer, code, grpcCodeName(code), err);
      if (socket.destroyed) return;
      // The refusal is logged; a reset while lingering is not news (and must not throw).
      socket.on("error", () => {});
      // The message first, as the gRPC status's, then the code and quota (refusal-details.ts).
      socket.end(encodeRefused(code, err instanceof GatewayError ? dialErrorText(err) : details));
      const linger = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
      linger.unref();
      socket.once("close", () => clearTimeout(linger));
      socket.resume(); // read (and drop) until the agent closes
    }
  };
}
