import { fileURLToPath } from "node:url";
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import { ProtocolError } from "../../lib/errors.js";
import { decodePacket, encodeDataPacketHeader, encodePacket } from "../../lib/proto/codec.js";
import {
  closeDial,
  closeRequest,
  closeResponse,
  credit,
  dataPacket,
  dialRequest,
  dialResponse,
  drain,
  type Packet,
  PacketType,
  serverCountUpdate,
} from "../../lib/proto/packet.js";

// The reference: protobufjs reading the same .proto that documents the wire contract.
const root = protobuf.loadSync(fileURLToPath(new URL("../../lib/proto/konnectivity.proto", import.meta.url)));
const RefPacket = root.lookupType("Packet");

const MAX_INT64 = 2n ** 63n - 1n;
const MIN_INT64 = -(2n ** 63n);

/** Converts our flat packet into protobufjs' nested message shape. */
function toReference(p: Exclude<Packet, { type: "unknown" }>): Record<string, unknown> {
  const s = (v: bigint) => v.toString();
  switch (p.type) {
    case PacketType.DIAL_REQ:
      return {
        type: p.type,
        dialRequest: { protocol: p.protocol, address: p.address, random: s(p.random), egress: p.egress },
      };
    case PacketType.DIAL_RSP:
      return {
        type: p.type,
        dialResponse: { error: p.error, connectID: s(p.connectId), random: s(p.random) },
      };
    case PacketType.CLOSE_REQ:
      return { type: p.type, closeRequest: { connectID: s(p.connectId) } };
    case PacketType.CLOSE_RSP:
      return { type: p.type, closeResponse: { error: p.error, connectID: s(p.connectId) } };
    case PacketType.DATA:
      return { type: p.type, data: { connectID: s(p.connectId), error: p.error, data: p.data } };
    case PacketType.DIAL_CLS:
      return { type: p.type, closeDial: { random: s(p.random) } };
    case PacketType.DRAIN:
      return { type: p.type, drain: {} };
    case PacketType.KGW_CREDIT:
      return { type: p.type, credit: { connectID: s(p.connectId), bytes: s(p.bytes) } };
    case PacketType.KGW_SERVER_COUNT:
      return { type: p.type, serverCount: { count: s(p.count) } };
  }
}

/**
 * protobufjs writes every field that is present on the object, defaults included; Go (and the
 * proto3 canonical form) omits defaults. Strip them so the reference is canonical proto3.
 */
function withoutDefaults(value: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === "" || v === "0" || v === 0) continue;
    if (v instanceof Uint8Array && v.byteLength === 0) continue;
    out[k] =
      v !== null && typeof v === "object" && !(v instanceof Uint8Array)
        ? withoutDefaults(v as Record<string, unknown>)
        : v;
  }
  return out;
}

function referenceEncode(p: Exclude<Packet, { type: "unknown" }>): Buffer {
  return Buffer.from(RefPacket.encode(RefPacket.fromObject(withoutDefaults(toReference(p)))).finish());
}

const samples: Array<[string, Exclude<Packet, { type: "unknown" }>]> = [
  ["DIAL_REQ with a 63-bit random", dialRequest("10.0.0.5:10250", 8_446_744_073_709_551_615n)],
  ["DIAL_REQ with all defaults", dialRequest("", 0n, "")],
  ["DIAL_REQ with a non-ASCII host", dialRequest("bücher.example:443", 7n)],
  [
    "DIAL_REQ with an egress policy (our extension)",
    dialRequest(
      "10.0.0.5:10250",
      9n,
      "tcp",
      JSON.stringify({ allow: ["10.0.0.0/8", "*"], big: "é".repeat(200) }),
    ),
  ],
  ["DIAL_RSP success", dialResponse(MAX_INT64, 1n)],
  ["DIAL_RSP failure", dialResponse(-1n, 0n, "dial tcp 127.0.0.1:1: connect: connection refused")],
  ["DIAL_RSP with the smallest int64", dialResponse(MIN_INT64, 2n ** 53n + 1n)],
  ["CLOSE_REQ", closeRequest(300n)],
  ["CLOSE_RSP with error", closeResponse(9n, "unknown connectID")],
  ["DATA small", dataPacket(1n, Buffer.from("hello"))],
  ["DATA empty", dataPacket(5n, new Uint8Array(0))],
  ["DATA 1 MiB", dataPacket(2n ** 40n, Buffer.alloc(1 << 20, 0xab))],
  ["DATA with error", dataPacket(3n, new Uint8Array(0), "read: connection reset")],
  ["DIAL_CLS", closeDial(123_456_789_012n)],
  ["DRAIN", drain()],
  ["KGW_CREDIT (our extension)", credit(7n, 2 * 1024 * 1024)],
  ["KGW_SERVER_COUNT (our extension)", serverCountUpdate(3)],
];

describe("packet codec", () => {
  it.each(samples)("encodes %s byte-for-byte like protobufjs", (_name, packet) => {
    expect(encodePacket(packet).equals(referenceEncode(packet))).toBe(true);
  });

  it.each(samples)("decodes %s from protobufjs bytes", (_name, packet) => {
    const decoded = decodePacket(referenceEncode(packet));
    if (packet.type === PacketType.DATA && decoded.type === PacketType.DATA) {
      expect(Buffer.from(decoded.data).equals(Buffer.from(packet.data))).toBe(true);
      expect({ ...decoded, data: null }).toEqual({ ...packet, data: null });
    } else {
      expect(decoded).toEqual(packet);
    }
  });

  it("returns DATA payloads as views into the message, without copying", () => {
    const wire = encodePacket(dataPacket(1n, Buffer.from("payload")));
    const decoded = decodePacket(wire);
    if (decoded.type !== PacketType.DATA) throw new Error("expected DATA");
    expect(decoded.data.buffer).toBe(wire.buffer);
  });

  it("decodes a packet with no payload as the empty message of its type, like Go getters", () => {
    expect(decodePacket(Buffer.from([0x08, PacketType.DATA]))).toEqual(dataPacket(0n, new Uint8Array(0)));
    expect(decodePacket(Buffer.alloc(0))).toEqual(dialRequest("", 0n, ""));
  });

  it("skips unknown fields so newer peers can add them", () => {
    const known = encodePacket(closeRequest(42n));
    // field 15 varint, field 9 length-delimited, field 10 fixed32, field 11 fixed64 — in the packet and payload
    const extra = Buffer.from([
      0x78, 0x01, 0x4a, 0x02, 0x61, 0x62, 0x55, 1, 2, 3, 4, 0x59, 1, 2, 3, 4, 5, 6, 7, 8,
    ]);
    const payloadWithExtra = Buffer.concat([Buffer.from([0x08, 42]), Buffer.from([0x58, 0x05])]);
    const packetWithExtra = Buffer.concat([
      Buffer.from([0x08, PacketType.CLOSE_REQ, 0x2a, payloadWithExtra.length]),
      payloadWithExtra,
      extra,
    ]);
    expect(decodePacket(packetWithExtra)).toEqual(decodePacket(known));
  });

  it("an upstream reader of a DIAL_REQ with our egress field sees the dial, and nothing else", () => {
    // Upstream's Packet has no field 100 in DialRequest: a proto3 reader skips it.
    const upstream = protobuf
      .parse(`syntax = "proto3";
      message DialRequest { string protocol = 1; string address = 2; int64 random = 3; }
      message Packet { int32 type = 1; oneof payload { DialRequest dialRequest = 2; } }`)
      .root.lookupType("Packet");
    const wire = encodePacket(dialRequest("10.0.0.5:443", 5n, "tcp", '{"allow":["*"]}'));
    const seen = upstream.toObject(upstream.decode(wire), { longs: String });
    expect(seen).toEqual({ dialRequest: { protocol: "tcp", address: "10.0.0.5:443", random: "5" } });
  });

  it("refuses an egress field of the wrong wire type", () => {
    // DialRequest { egress(100) as varint 1 }: tag 100<<3|0 = 0x320 → 0xa0 0x06.
    const payload = Buffer.from([0xa0, 0x06, 0x01]);
    const wire = Buffer.concat([Buffer.from([0x12, payload.length]), payload]);
    expect(() => decodePacket(wire)).toThrow(ProtocolError);
  });

  it("decodes packet types newer than this build as unknown instead of failing", () => {
    expect(decodePacket(Buffer.from([0x08, 42]))).toEqual({ type: "unknown", rawType: 42 });
    const negative = Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    expect(decodePacket(negative)).toEqual({ type: "unknown", rawType: -1 });
  });

  it.each([
    ["truncated varint", [0x08]],
    ["length beyond the message", [0x22, 0x05, 0x08]],
    ["a varint of eleven bytes", [0x08, ...Array(10).fill(0xff), 0x01]],
    ["a payload that contradicts the type", [0x08, PacketType.DATA, 0x12, 0x00]],
    ["a type sent as a string", [0x0a, 0x01, 0x41]],
    ["a group wire type", [0x0b]],
    ["DATA bytes sent as a varint", [0x08, PacketType.DATA, 0x22, 0x02, 0x18, 0x01]],
  ])("rejects %s with a ProtocolError", (_name, bytes) => {
    expect(() => decodePacket(Buffer.from(bytes))).toThrow(ProtocolError);
  });

  it("refuses to encode an unknown packet", () => {
    expect(() => encodePacket({ type: "unknown", rawType: 9 })).toThrow(ProtocolError);
  });

  it.each([
    [0n, 0],
    [1n, 1],
    [300n, 127],
    [MAX_INT64, 128],
    [-1n, 16_383],
    [MIN_INT64, 16_384],
    [7n, 65_536],
    [9n, 16 * 1024 * 1024],
  ])("DATA header for connectID %s and %i bytes, followed by the data, is the encoded packet", (id, n) => {
    const data = Buffer.alloc(n, 0x5a);
    const header = encodeDataPacketHeader(id, n, 5);
    expect(header.subarray(0, 5)).toHaveLength(5);
    const joined = Buffer.concat([header.subarray(5), data]);
    expect(joined.equals(encodePacket(dataPacket(id, data)))).toBe(true);
    expect(joined.equals(referenceEncode(dataPacket(id, data)))).toBe(true);
  });

  it("round-trips random packets", () => {
    let seed = 1;
    const rand = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed;
    };
    const randInt64 = () =>
      BigInt.asIntN(64, (BigInt(rand()) << 33n) ^ (BigInt(rand()) << 2n) ^ BigInt(rand()));
    for (let i = 0; i < 500; i++) {
      const packet = [
        dialRequest(`host-${rand()}:${rand() % 65536}`, randInt64()),
        dialResponse(randInt64(), randInt64(), i % 3 === 0 ? "boom" : ""),
        dataPacket(randInt64(), Buffer.alloc(rand() % 300, i)),
        closeResponse(randInt64(), i % 2 === 0 ? "é" : ""),
      ][i % 4]!;
      const wire = encodePacket(packet);
      expect(wire.equals(referenceEncode(packet))).toBe(true);
      const back = decodePacket(wire);
      expect(encodePacket(back).equals(wire)).toBe(true);
    }
  });
});
