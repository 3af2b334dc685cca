import { describe, expect, it } from "vitest";
import { ProtocolError } from "../../lib/errors.js";
import {
  DATA_HEADER_BYTES,
  DATA_SLICE_BYTES,
  type DecodedFrame,
  encodeDataHeader,
  encodeFrame,
  FrameDecoder,
  FrameType,
  MAX_DATA_FRAME_BYTES,
  MAX_HANDSHAKE_FRAME_BYTES,
} from "../../lib/proto/tunnel-frames.js";
import {
  encodeHello,
  encodeRefused,
  encodeWelcome,
  MAX_HANDSHAKE_HEADERS,
  parseHello,
  parseServerAnswer,
} from "../../lib/transport/tunnel-handshake.js";

function drain(decoder: FrameDecoder): DecodedFrame[] {
  const out: DecodedFrame[] = [];
  for (let f = decoder.next(); f !== null; f = decoder.next()) out.push(f);
  return out;
}

function dataFrame(connectId: bigint, data: Buffer): Buffer {
  return Buffer.concat([encodeDataHeader(connectId, data.byteLength), data]);
}

function header(type: number, length: number): Buffer {
  const h = Buffer.alloc(5);
  h[0] = type;
  h.writeUInt32BE(length, 1);
  return h;
}

describe("FrameDecoder", () => {
  it("decodes control and DATA frames from one chunk", () => {
    const d = new FrameDecoder();
    d.push(
      Buffer.concat([encodeFrame(FrameType.PING, Buffer.alloc(8, 7)), dataFrame(42n, Buffer.from("hello"))]),
    );
    const frames = drain(d);
    expect(frames).toHaveLength(2);
    expect(frames[0]).toMatchObject({ kind: "frame", type: FrameType.PING });
    expect(frames[1]).toMatchObject({ kind: "data", connectId: 42n });
    expect((frames[1] as { data: Buffer }).data.toString()).toBe("hello");
    expect(d.pendingBytes).toBe(0);
  });

  it("reassembles frames split at every byte boundary", () => {
    const wire = Buffer.concat([
      encodeFrame(FrameType.PACKET, Buffer.from([1, 2, 3])),
      dataFrame(7n, Buffer.from("abcdef")),
      encodeFrame(FrameType.PONG, Buffer.alloc(8)),
    ]);
    for (let cut = 1; cut < wire.byteLength; cut++) {
      const d = new FrameDecoder();
      d.push(wire.subarray(0, cut));
      const first = drain(d);
      d.push(wire.subarray(cut));
      const frames = [...first, ...drain(d)];
      const data = Buffer.concat(frames.flatMap((f) => (f.kind === "data" ? [f.data] : [])));
      expect(data.toString(), `cut at ${cut}`).toBe("abcdef");
      expect(frames.filter((f) => f.kind === "frame").map((f) => (f as { type: number }).type)).toEqual([
        FrameType.PACKET,
        FrameType.PONG,
      ]);
    }
  });

  it("hands out DATA bytes as views of the received chunk, never copies", () => {
    const payload = Buffer.alloc(64 * 1024, 0xab);
    const chunk = dataFrame(1n, payload);
    const d = new FrameDecoder();
    d.push(chunk);
    const [frame] = drain(d);
    expect(frame?.kind).toBe("data");
    const data = (frame as { data: Buffer }).data;
    expect(data.buffer).toBe(chunk.buffer);
    expect(data.byteOffset).toBe(chunk.byteOffset + DATA_HEADER_BYTES);
  });

  it("joins a DATA frame that arrives as 16 KiB TLS reads into one packet", () => {
    const payload = Buffer.alloc(64 * 1024);
    for (let i = 0; i < payload.byteLength; i++) payload[i] = i % 251;
    const wire = dataFrame(3n, payload);
    const d = new FrameDecoder();
    const frames: DecodedFrame[] = [];
    for (let off = 0; off < wire.byteLength; off += 16 * 1024) {
      d.push(wire.subarray(off, off + 16 * 1024));
      frames.push(...drain(d));
      if (off + 16 * 1024 < wire.byteLength) expect(frames).toHaveLength(0);
    }
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ kind: "data", connectId: 3n });
    expect((frames[0] as { data: Buffer }).data.equals(payload)).toBe(true);
    expect(d.pendingBytes).toBe(0);
  });

  it('in "views" mode hands out each TLS read\'s part of a DATA frame as a view of it, never a copy', () => {
    // What the agent receives on an upload: 16 KiB DATA frames, 16 KiB TLS reads, so every
    // frame's last 13 bytes arrive in the next read, behind nothing but the next header.
    const payloads = [0, 1, 2].map((n) => Buffer.alloc(16 * 1024, n + 1));
    const wire = Buffer.concat(payloads.map((p, i) => dataFrame(BigInt(i + 1), p)));
    const reads: Buffer[] = [];
    for (let off = 0; off < wire.byteLength; off += 16 * 1024) {
      reads.push(Buffer.from(wire.subarray(off, off + 16 * 1024))); // a buffer of its own, as a read is
    }
    const d = new FrameDecoder("views");
    const slices: DecodedFrame[] = [];
    for (const r of reads) {
      d.push(r);
      slices.push(...drain(d));
    }
    expect(d.pendingBytes).toBe(0);
    for (const f of slices) {
      expect(f.kind).toBe("data");
      const data = (f as { data: Buffer }).data;
      expect(reads.some((r) => r.buffer === data.buffer)).toBe(true);
    }
    for (const [i, p] of payloads.entries()) {
      const got = Buffer.concat(
        slices.flatMap((f) => (f.kind === "data" && f.connectId === BigInt(i + 1) ? [f.data] : [])),
      );
      expect(got.equals(p)).toBe(true);
    }
  });

  it("buffers at most DATA_SLICE_BYTES of a large DATA frame", () => {
    const d = new FrameDecoder();
    d.push(encodeDataHeader(9n, 1_000_000));
    d.push(Buffer.alloc(1000, 1));
    expect(drain(d)).toHaveLength(0);
    expect(d.pendingBytes).toBe(1000);
    d.push(Buffer.alloc(DATA_SLICE_BYTES, 2));
    const frames = drain(d);
    expect(frames.map((f) => (f as { data: Buffer }).data.byteLength)).toEqual([DATA_SLICE_BYTES]);
    expect(d.pendingBytes).toBe(1000);
    // The rest came in one chunk: it comes out at once, as a view however large.
    d.push(Buffer.alloc(1_000_000 - DATA_SLICE_BYTES - 1000, 3));
    const rest = drain(d);
    expect(rest.reduce((n, f) => n + (f as { data: Buffer }).data.byteLength, 0)).toBe(
      1_000_000 - DATA_SLICE_BYTES,
    );
    expect(d.pendingBytes).toBe(0);
  });

  it.each([
    ["an unknown frame type", header(99, 0), /unknown tunnel frame type 99/],
    [
      "an oversized handshake frame",
      header(FrameType.HELLO, MAX_HANDSHAKE_FRAME_BYTES + 1),
      /over the limit/,
    ],
    ["an oversized DATA frame", header(FrameType.DATA, MAX_DATA_FRAME_BYTES + 1), /over the limit/],
    ["a DATA frame without its connectID", header(FrameType.DATA, 4), /shorter than its connectID/],
    ["a PING of the wrong size", header(FrameType.PING, 3), /exactly 8 bytes/],
  ])("refuses %s as soon as its header is in, before buffering the payload", (_name, wire, message) => {
    const d = new FrameDecoder();
    d.push(wire);
    expect(() => d.next()).toThrow(ProtocolError);
    const again = new FrameDecoder();
    again.push(wire);
    expect(() => again.next()).toThrow(message);
  });

  it("waits for the rest of a frame without yielding anything", () => {
    const d = new FrameDecoder();
    d.push(encodeFrame(FrameType.PACKET, Buffer.alloc(100)).subarray(0, 50));
    expect(d.next()).toBeNull();
    expect(d.pendingBytes).toBe(50);
  });
});

describe("tunnel handshake", () => {
  const decodeOne = (wire: Buffer) => {
    const d = new FrameDecoder();
    d.push(wire);
    const f = d.next();
    if (f?.kind !== "frame") throw new Error("expected a control frame");
    return f;
  };

  it("round-trips HELLO metadata, WELCOME headers and REFUSED", () => {
    const md = { agentid: ["a1"], authorization: ["Bearer t"], "kgw-flow-control": ["credit-v1"] };
    expect(parseHello(decodeOne(encodeHello(md)))).toEqual(md);
    expect(parseServerAnswer(decodeOne(encodeWelcome({ serverid: ["s"], servercount: ["2"] })))).toEqual({
      kind: "welcome",
      headers: { serverid: ["s"], servercount: ["2"] },
    });
    expect(parseServerAnswer(decodeOne(encodeRefused(16, "invalid agent token")))).toEqual({
      kind: "refused",
      code: 16,
      message: "invalid agent token",
    });
  });

  it.each([
    ["not JSON", Buffer.from("{nope"), /not valid JSON/],
    ["a JSON array", Buffer.from("[]"), /JSON object/],
    ["metadata that is not an object", Buffer.from('{"metadata":"x"}'), /object of string arrays/],
    ["a non-string value", Buffer.from('{"metadata":{"agentid":[1]}}'), /array of strings/],
    ["an invalid header name", Buffer.from('{"metadata":{"Agent ID":["a"]}}'), /invalid header name/],
    [
      "too many headers",
      Buffer.from(
        JSON.stringify({
          metadata: Object.fromEntries(
            Array.from({ length: MAX_HANDSHAKE_HEADERS + 1 }, (_, i) => [`h${i}`, ["v"]]),
          ),
        }),
      ),
      /more than 32 headers/,
    ],
  ])("refuses a HELLO that is %s", (_name, payload, message) => {
    expect(() => parseHello(decodeOne(encodeFrame(FrameType.HELLO, payload)))).toThrow(message);
  });

  it("refuses a first frame that is not HELLO, and a server answer that is neither WELCOME nor REFUSED", () => {
    expect(() => parseHello(decodeOne(encodeFrame(FrameType.PACKET, Buffer.alloc(0))))).toThrow(
      /expected HELLO/,
    );
    expect(() => parseServerAnswer(decodeOne(encodeFrame(FrameType.HELLO, Buffer.from("{}"))))).toThrow(
      /expected WELCOME or REFUSED/,
    );
    expect(() =>
      parseServerAnswer(decodeOne(encodeFrame(FrameType.REFUSED, Buffer.from('{"code":"x"}')))),
    ).toThrow(/integer code/);
  });

  it("does not let a header named like an Object property through", () => {
    const md = parseHello(decodeOne(encodeFrame(FrameType.HELLO, Buffer.from('{"metadata":{}}'))));
    expect(Object.hasOwn(md, "constructor")).toBe(false);
  });
});
