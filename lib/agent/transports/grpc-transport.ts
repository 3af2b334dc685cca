/**
 * AgentService.Connect over gRPC, on a channel of its own: what upstream servers speak. The
 * stream counts as open once the server's response headers have arrived.
 */
import {
  type ChannelCredentials,
  type ChannelOptions,
  Client,
  type ClientDuplexStream,
  connectivityState,
  Metadata,
  type StatusObject,
  status,
} from "@grpc/grpc-js";
import { decodePacket, encodePacket } from "../../proto/codec.js";
import type { Packet } from "../../proto/packet.js";
import { AGENT_SERVICE } from "../../transport/grpc/services.js";
import { ServerConnectError } from "../errors.js";
import { grpcSocketWatch, type WatchedAddress } from "./grpc-socket-watch.js";
import type { HeaderMap, OpenedStream, StreamEnd } from "./opened-stream.js";

const CONNECT_PATH = AGENT_SERVICE.connect!.path;

export interface GrpcTarget {
  /** "host:port" as grpc-js takes it (IPv6 literals bracketed). */
  target: string;
  /** The same address, for the socket watch (grpc-socket-watch.ts). */
  address: WatchedAddress;
  credentials: ChannelCredentials;
  channelOptions: ChannelOptions;
}

function toMetadata(headers: HeaderMap): Metadata {
  const md = new Metadata();
  for (const [name, values] of Object.entries(headers)) for (const v of values) md.add(name, v);
  return md;
}

function fromMetadata(md: Metadata): HeaderMap {
  const out: Record<string, string[]> = Object.create(null);
  for (const [name, value] of Object.entries(md.getMap())) {
    if (typeof value === "string") out[name] = md.get(name).filter((v): v is string => typeof v === "string");
  }
  return out;
}

type GrpcError = Error & { code?: number; details?: string };

export function openGrpcStream(
  target: GrpcTarget,
  metadata: HeaderMap,
  timeoutMs: number,
): Promise<OpenedStream> {
  // The connection grpc-js makes for this channel is watched for a server gone mid-write.
  const stopExpecting = grpcSocketWatch.expect(target.address);
  const client = new Client(target.target, target.credentials, target.channelOptions);
  const call: ClientDuplexStream<Packet, Packet> = client.makeBidiStreamRequest(
    CONNECT_PATH,
    encodePacket,
    decodePacket,
    toMetadata(metadata),
    {},
  );
  let closed = false;
  let ended: StreamEnd | null = null;
  const endListeners: ((end: StreamEnd) => void)[] = [];
  const finish = (end: StreamEnd) => {
    if (ended) return;
    ended = end;
    for (const l of endListeners) l(end);
  };
  const close = () => {
    if (closed) return;
    closed = true;
    call.cancel(); // no-op once the status has arrived
    client.close();
  };
  // Always listened to: grpc-js emits "error" for every non-OK status, including our cancel.
  call.on("error", (err: GrpcError) =>
    finish({
      reason: `stream error: ${err.details ?? err.message}`,
      error: closed && err.code === status.CANCELLED ? undefined : err,
      code: err.code,
    }),
  );
  call.on("status", (s: StatusObject) =>
    finish({ reason: `stream ended: ${status[s.code]} ${s.details}`.trim(), code: s.code }),
  );

  return new Promise<OpenedStream>((resolve, reject) => {
    const fail = (reason: string, code?: number, cause?: unknown) => {
      clearTimeout(timer);
      stopExpecting();
      close();
      reject(new ServerConnectError(reason, code, { cause }));
    };
    const timer = setTimeout(() => fail(`no response headers within ${timeoutMs}ms`), timeoutMs);
    endListeners.push((end) => fail(end.reason, end.code, end.error));
    call.once("metadata", (headers: Metadata) => {
      if (ended) return;
      clearTimeout(timer);
      stopExpecting();
      endListeners.length = 0;
      resolve({
        transport: "grpc",
        stream: call,
        headers: fromMetadata(headers),
        onEnd: (l) => (ended ? queueMicrotask(() => l(ended!)) : endListeners.push(l)),
        brokenReason: () => {
          // Upstream's probe. IDLE and CONNECTING are not failures: a server that sent GOAWAY to
          // drain leaves the channel IDLE while our stream keeps working until it ends.
          const state = client.getChannel().getConnectivityState(false);
          return state === connectivityState.TRANSIENT_FAILURE || state === connectivityState.SHUTDOWN
            ? `transport ${connectivityState[state]}`
            : null;
        },
        close,
      });
    });
  });
}
