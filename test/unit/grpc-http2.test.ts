import { describe, expect, it } from "vitest";
import { MessageTooLargeError, ProtocolError, UnsupportedError } from "../../lib/errors.js";
import {
  encodeGrpcMessage,
  GrpcMessageDecoder,
  parseGrpcTimeout,
  writeMessagePrefix,
} from "../../lib/proto/grpc-http2.js";

function framed(...messages: Buffer[]): Buffer {
  return Buffer.concat(
    messages.flatMap((m) => {
      const p = Buffer.alloc(5);
      writeMessagePrefix(p, m.byteLength);
      return [p, m];
    }),
  );
}

function drain(d: GrpcMessageDecoder): Buffer[] {
  const out: Buffer[] = [];
  for (let m = d.next(); m !== null; m = d.next()) out.push(m);
  return out;
}

describe("GrpcMessageDecoder", () => {
  it("decodes several messages from one chunk, empty ones included", () => {
    const d = new GrpcMessageDecoder(1024);
    d.push(framed(Buffer.from("one"), Buffer.alloc(0), Buffer.from("three")));
    expect(drain(d).map(String)).toEqual(["one", "", "three"]);
    expect(d.pendingBytes).toBe(0);
  });

  it("reassembles messages split at every byte boundary", () => {
    const wire = framed(Buffer.from("hello"), Buffer.from("world!"));
    for (let cut = 1; cut < wire.byteLength; cut++) {
      const d = new GrpcMessageDecoder(1024);
      d.push(wire.subarray(0, cut));
      const first = drain(d);
      d.push(wire.subarray(cut));
      expect([...first, ...drain(d)].map(String), `cut at ${cut}`).toEqual(["hello", "world!"]);
    }
  });

  it("hands out a message that lies in one chunk as a view of it, not a copy", () => {
    const chunk = framed(Buffer.alloc(64 * 1024, 1));
    const d = new GrpcMessageDecoder(1024 * 1024);
    d.push(chunk);
    const [m] = drain(d);
    expect(m!.buffer).toBe(chunk.buffer);
    expect(m!.byteOffset).toBe(chunk.byteOffset + 5);
  });

  it("joins a message that arrives as 16 KiB HTTP/2 frames", () => {
    const body = Buffer.alloc(40_000);
    for (let i = 0; i < body.length; i++) body[i] = i % 253;
    const wire = framed(body);
    const d = new GrpcMessageDecoder(1024 * 1024);
    const got: Buffer[] = [];
    for (let off = 0; off < wire.length; off += 16_384) {
      d.push(wire.subarray(off, off + 16_384));
      got.push(...drain(d));
    }
    expect(got).toHaveLength(1);
    expect(got[0]!.equals(body)).toBe(true);
  });

  it("waits for the rest of a message without yielding anything", () => {
    const d = new GrpcMessageDecoder(1024);
    d.push(framed(Buffer.alloc(100)).subarray(0, 60));
    expect(d.next()).toBeNull();
    expect(d.pendingBytes).toBe(60);
  });

  it.each([
    ["a compressed message", 1, 3, UnsupportedError, /identity encoding only/],
    ["an unknown flag", 2, 3, ProtocolError, /invalid gRPC message flag 2/],
    [
      "a message over the limit",
      0,
      1025,
      MessageTooLargeError,
      /1025 bytes is larger than the limit of 1024/,
    ],
  ])("refuses %s as soon as its prefix is in, before buffering it", (_name, flag, length, type, text) => {
    const p = Buffer.alloc(5);
    p[0] = flag;
    p.writeUInt32BE(length, 1);
    const d = new GrpcMessageDecoder(1024);
    d.push(p);
    expect(() => d.next()).toThrow(type);
    const again = new GrpcMessageDecoder(1024);
    again.push(p);
    expect(() => again.next()).toThrow(text);
  });

  it("takes a message of exactly the limit", () => {
    const d = new GrpcMessageDecoder(1024);
    d.push(framed(Buffer.alloc(1024)));
    expect(drain(d)[0]).toHaveLength(1024);
  });
});

describe("grpc-timeout", () => {
  it.each([
    ["1H", 3_600_000],
    ["2M", 120_000],
    ["30S", 30_000],
    ["250m", 250],
    ["1500u", 1.5],
    ["99999999n", 99.999999],
  ])("reads %s as %d ms", (value, ms) => {
    expect(parseGrpcTimeout(value)).toBeCloseTo(ms, 9);
  });

  it.each(["", "10", "S", "123456789S", "1.5S", "-1S", "10s", " 1S", "1S "])("refuses %j", (value) => {
    expect(parseGrpcTimeout(value)).toBeNull();
  });
});

describe("grpc-message encoding", () => {
  it("percent-encodes what is not printable ASCII, and the percent sign", () => {
    expect(encodeGrpcMessage("dial failed: 100% gone\né")).toBe("dial failed: 100%25 gone%0A%C3%A9");
    expect(decodeURIComponent(encodeGrpcMessage("a b~\t€"))).toBe("a b~\t€");
  });
});
