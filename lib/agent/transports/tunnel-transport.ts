/**
 * AgentService over kgw-tunnel/1 (lib/proto/tunnel-frames.ts): one TLS connection, ALPN
 * `kgw-tunnel/1`, HELLO with the Connect metadata, WELCOME with the server's headers. Offered to
 * every server; one that answers ALPN with `h2` (upstream, or ours with the tunnel turned off)
 * gets TunnelNotOfferedError and the caller falls back to gRPC on a new connection.
 */
import { type ConnectionOptions, connect as tlsConnect } from "node:tls";
import { ProtocolError } from "../../errors.js";
import { FrameDecoder, TUNNEL_ALPN } from "../../proto/tunnel-frames.js";
import { FramedPacketStream } from "../../transport/framed-packet-stream.js";
import {
  encodeHello,
  headerValues,
  parseServerAnswer,
  readHandshakeFrame,
} from "../../transport/tunnel-handshake.js";
import { CREDIT_FLOW_V1, FLOW_CONTROL_HEADER } from "../../tunnel/flow-control.js";
import { ServerConnectError } from "../errors.js";
import type { HeaderMap, OpenedStream, StreamEnd } from "./opened-stream.js";

/** The server does not speak kgw-tunnel/1; use gRPC. */
export class TunnelNotOfferedError extends ServerConnectError {
  constructor(alpn: string | false) {
    super(`server chose ALPN ${alpn === false ? "(none)" : alpn}, not ${TUNNEL_ALPN}`);
  }
}

export interface TunnelTarget {
  /** Host, port, SNI and credentials; ALPN is set here. */
  tls: ConnectionOptions;
  /** Idle time before a keepalive PING; 0 disables. */
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
}

export function openTunnelStream(
  target: TunnelTarget,
  metadata: HeaderMap,
  timeoutMs: number,
): Promise<OpenedStream> {
  return new Promise<OpenedStream>((resolve, reject) => {
    const socket = tlsConnect({ ...target.tls, ALPNProtocols: [TUNNEL_ALPN, "h2"] });
    socket.setNoDelay(true);
    let settled = false;
    const fail = (err: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      reject(
        err instanceof ServerConnectError
          ? err
          : new ServerConnectError(err.message, undefined, { cause: err }),
      );
    };
    const timer = setTimeout(
      () => fail(new ServerConnectError(`no tunnel handshake within ${timeoutMs}ms`)),
      timeoutMs,
    );
    const onClose = () => fail(new ServerConnectError("connection closed during the tunnel handshake"));
    socket.on("error", fail);
    socket.once("close", onClose);
    socket.once("secureConnect", async () => {
      if (socket.alpnProtocol !== TUNNEL_ALPN) {
        fail(new TunnelNotOfferedError(socket.alpnProtocol ?? false));
        return;
      }
      // Views, not joined slices: the agent writes DATA to a backend socket, where a slice costs
      // nothing of its own (EndpointConnection corks the pieces of one read into one writev).
      const decoder = new FrameDecoder("views");
      try {
        socket.write(encodeHello(metadata));
        const answer = parseServerAnswer(await readHandshakeFrame(socket, decoder, timeoutMs));
        if (answer.kind === "refused") {
          fail(new ServerConnectError(`server refused the stream: ${answer.message}`, answer.code));
          return;
        }
        if (!headerValues(answer.headers, FLOW_CONTROL_HEADER).includes(CREDIT_FLOW_V1)) {
          throw new ProtocolError(
            `a ${TUNNEL_ALPN} server must confirm ${FLOW_CONTROL_HEADER}: ${CREDIT_FLOW_V1}`,
          );
        }
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        socket.off("error", fail);
        socket.off("close", onClose);
        resolve(opened(socket, decoder, answer.headers, target));
      } catch (err) {
        fail(err as Error);
      }
    });
  });
}

function opened(
  socket: ReturnType<typeof tlsConnect>,
  decoder: FrameDecoder,
  headers: HeaderMap,
  target: TunnelTarget,
): OpenedStream {
  const stream = new FramedPacketStream(socket, decoder, {
    keepaliveMs: target.keepaliveMs,
    keepaliveTimeoutMs: target.keepaliveTimeoutMs,
  });
  let closedByUs = false;
  let lastError: Error | undefined;
  let ended: StreamEnd | null = null;
  const listeners: ((end: StreamEnd) => void)[] = [];
  stream.on("error", (err: Error) => {
    lastError = err;
  });
  stream.once("close", () => {
    ended = lastError
      ? { reason: `stream error: ${lastError.message}`, error: closedByUs ? undefined : lastError }
      : { reason: closedByUs ? "closed" : "stream ended by the server" };
    for (const l of listeners) l(ended);
  });
  return {
    transport: "tunnel",
    stream,
    headers,
    onEnd: (l) => {
      if (ended) queueMicrotask(() => l(ended!));
      else listeners.push(l);
    },
    // A dead socket is seen directly (EOF, error or keepalive), never only by a probe.
    brokenReason: () => null,
    close: () => {
      closedByUs = true;
      socket.destroy();
    },
  };
}
