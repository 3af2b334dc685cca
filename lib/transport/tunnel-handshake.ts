/**
 * The kgw-tunnel/1 handshake: the agent's HELLO carries the same metadata an AgentService.Connect
 * call would (agentID, authorization, ...), the server answers WELCOME with the response headers
 * (serverID, serverCount, ...) or REFUSED with a gRPC status code and message. Parsing is strict
 * and bounded: these bytes arrive before the peer has authenticated.
 */
import type { Socket } from "node:net";
import { ProtocolError } from "../errors.js";
import {
  type ControlFrame,
  encodeFrame,
  type FrameDecoder,
  FrameType,
  MAX_HANDSHAKE_FRAME_BYTES,
} from "../proto/tunnel-frames.js";

/** Metadata as both transports see it: lower-case names, each with its list of values. */
export type HeaderMap = Readonly<Record<string, readonly string[]>>;

export const MAX_HANDSHAKE_HEADERS = 32;
const HEADER_NAME = /^[a-z0-9][a-z0-9._-]{0,127}$/;

/**
 * Resolves with the first frame from `socket` (leaving later bytes in `decoder`), or rejects on
 * timeout, malformed or oversized input, or a socket that ends first. The socket is left paused;
 * whoever takes it over resumes it.
 */
export function readHandshakeFrame(
  socket: Socket,
  decoder: FrameDecoder,
  timeoutMs: number,
): Promise<ControlFrame> {
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, frame?: ControlFrame) => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.off("close", onEnd);
      socket.off("error", onError);
      socket.pause();
      if (err) reject(err);
      else resolve(frame!);
    };
    const onData = (chunk: Buffer) => {
      decoder.push(chunk);
      let frame: ReturnType<FrameDecoder["next"]>;
      try {
        frame = decoder.next();
      } catch (err) {
        done(err as Error);
        return;
      }
      if (frame === null) return;
      if (frame.kind !== "frame") done(new ProtocolError("DATA before the handshake"));
      else done(null, frame);
    };
    const onEnd = () => done(new ProtocolError("connection closed during the tunnel handshake"));
    const onError = (err: Error) => done(err);
    const timer = setTimeout(
      () => done(new ProtocolError(`no tunnel handshake within ${timeoutMs}ms`)),
      timeoutMs,
    );
    timer.unref();
    socket.on("data", onData);
    socket.once("end", onEnd);
    socket.once("close", onEnd);
    socket.once("error", onError);
    socket.resume();
  });
}

function encodeJson(type: FrameType, value: unknown): Buffer {
  const payload = Buffer.from(JSON.stringify(value), "utf8");
  if (payload.byteLength > MAX_HANDSHAKE_FRAME_BYTES) {
    throw new ProtocolError(`handshake of ${payload.byteLength} bytes is over ${MAX_HANDSHAKE_FRAME_BYTES}`);
  }
  return encodeFrame(type, payload);
}

function parseJsonObject(frame: ControlFrame, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(frame.payload.toString("utf8"));
  } catch {
    throw new ProtocolError(`${what} is not valid JSON`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtocolError(`${what} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

function parseHeaders(value: unknown, what: string): HeaderMap {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ProtocolError(`${what} must be an object of string arrays`);
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_HANDSHAKE_HEADERS) {
    throw new ProtocolError(`${what} has more than ${MAX_HANDSHAKE_HEADERS} headers`);
  }
  const out: Record<string, string[]> = Object.create(null);
  for (const [name, values] of entries) {
    if (!HEADER_NAME.test(name)) throw new ProtocolError(`${what}: invalid header name`);
    if (!Array.isArray(values) || !values.every((v) => typeof v === "string")) {
      throw new ProtocolError(`${what}: header ${name} must be an array of strings`);
    }
    out[name] = values;
  }
  return out;
}

function expectType(frame: ControlFrame, type: FrameType, what: string): void {
  if (frame.type !== type) throw new ProtocolError(`expected ${what}, got frame type ${frame.type}`);
}

export const encodeHello = (metadata: HeaderMap): Buffer => encodeJson(FrameType.HELLO, { metadata });

export function parseHello(frame: ControlFrame): HeaderMap {
  expectType(frame, FrameType.HELLO, "HELLO");
  return parseHeaders(parseJsonObject(frame, "HELLO").metadata, "HELLO metadata");
}

export const encodeWelcome = (headers: HeaderMap): Buffer => encodeJson(FrameType.WELCOME, { headers });

export const encodeRefused = (code: number, message: string): Buffer =>
  encodeJson(FrameType.REFUSED, { code, message: message.slice(0, 1024) });

export type ServerAnswer =
  | { kind: "welcome"; headers: HeaderMap }
  | { kind: "refused"; code: number; message: string };

export function parseServerAnswer(frame: ControlFrame): ServerAnswer {
  if (frame.type === FrameType.WELCOME) {
    return {
      kind: "welcome",
      headers: parseHeaders(parseJsonObject(frame, "WELCOME").headers, "WELCOME headers"),
    };
  }
  if (frame.type === FrameType.REFUSED) {
    const { code, message } = parseJsonObject(frame, "REFUSED");
    if (typeof code !== "number" || !Number.isInteger(code) || typeof message !== "string") {
      throw new ProtocolError("REFUSED must carry an integer code and a message");
    }
    return { kind: "refused", code, message };
  }
  throw new ProtocolError(`expected WELCOME or REFUSED, got frame type ${frame.type}`);
}

/** Values of `name` in a header map (none when absent). */
export const headerValues = (headers: HeaderMap, name: string): readonly string[] =>
  Object.hasOwn(headers, name) ? headers[name]! : [];
