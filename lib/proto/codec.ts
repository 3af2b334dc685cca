/**
 * Hand-written protobuf codec for the tunnel `Packet` (konnectivity.proto).
 *
 * Why not a generated codec: this is the data path. Every tunneled byte passes through here
 * twice, and the schema is a fixed, tiny wire contract. Encoding computes the exact size and
 * writes once into one buffer; decoding returns `data` as a view into the received message,
 * never a copy. Byte-for-byte agreement with protobufjs is checked in test/unit/codec.test.ts.
 *
 * Proto3 rules kept: default values (0, "", empty bytes) are omitted; a oneof payload is always
 * written, even when empty; unknown fields are skipped; a missing payload decodes as the empty
 * message of its type (as Go's getters do).
 */
import { ProtocolError } from "../errors.js";
import { type DialResponsePacket, type Packet, PacketType } from "./packet.js";
import {
  expectWireType,
  int64FieldSize,
  lenFieldSize,
  Reader,
  varintSize,
  WIRE_LEN,
  WIRE_VARINT,
  Writer,
} from "./wire.js";

/** Packet oneof field number for each packet type (DIAL_REQ → dialRequest = 2, ...). */
const PAYLOAD_FIELD: Readonly<Record<number, number>> = {
  [PacketType.DIAL_REQ]: 2,
  [PacketType.DIAL_RSP]: 3,
  [PacketType.CLOSE_REQ]: 5,
  [PacketType.CLOSE_RSP]: 6,
  [PacketType.DATA]: 4,
  [PacketType.DIAL_CLS]: 7,
  [PacketType.DRAIN]: 8,
  // Our extension's payload, Credit{connectID=1 int64, bytes=2 int64}, far from upstream's fields.
  [PacketType.KGW_CREDIT]: 100,
  // ServerCount{count=1 int64}, our extension (server to agent only).
  [PacketType.KGW_SERVER_COUNT]: 101,
};

/** DialRequest.egress, our extension: field 100, length-delimited (a two-byte tag). */
const EGRESS_FIELD = 100;
const EGRESS_TAG = (EGRESS_FIELD << 3) | WIRE_LEN;
/** DialResponse.failure and CloseResponse.failure, our extension (peer links only): field 100, length-delimited. */
const FAILURE_FIELD = 100;
const FAILURE_TAG = (FAILURE_FIELD << 3) | WIRE_LEN;
/** DialResponse.agent, our extension (peer links only): field 101, length-delimited. */
const AGENT_FIELD = 101;
const AGENT_TAG = (AGENT_FIELD << 3) | WIRE_LEN;

function encodeBody(packet: Exclude<Packet, { type: "unknown" }>, w: Writer | null): number {
  // One function computes the size (w === null) and writes (w !== null) so the two can never
  // disagree about which fields are present.
  switch (packet.type) {
    case PacketType.DIAL_REQ: {
      const p = Buffer.byteLength(packet.protocol);
      const a = Buffer.byteLength(packet.address);
      const e = packet.egress === undefined ? 0 : Buffer.byteLength(packet.egress);
      if (w) {
        w.stringField(0x0a, packet.protocol, p);
        w.stringField(0x12, packet.address, a);
        w.int64Field(0x18, packet.random);
        if (e !== 0) {
          w.varint(EGRESS_TAG);
          w.varint(e);
          w.pos += w.buf.write(packet.egress as string, w.pos, e, "utf8");
        }
      }
      const egressSize = e === 0 ? 0 : varintSize(EGRESS_TAG) + varintSize(e) + e;
      return lenFieldSize(p) + lenFieldSize(a) + int64FieldSize(packet.random) + egressSize;
    }
    case PacketType.DIAL_RSP: {
      const e = Buffer.byteLength(packet.error);
      const f = packet.failure === undefined ? 0 : Buffer.byteLength(packet.failure);
      const g = packet.agent === undefined ? 0 : Buffer.byteLength(packet.agent);
      if (w) {
        w.stringField(0x0a, packet.error, e);
        w.int64Field(0x10, packet.connectId);
        w.int64Field(0x18, packet.random);
        if (f !== 0) {
          w.varint(FAILURE_TAG);
          w.varint(f);
          w.pos += w.buf.write(packet.failure as string, w.pos, f, "utf8");
        }
        if (g !== 0) {
          w.varint(AGENT_TAG);
          w.varint(g);
          w.pos += w.buf.write(packet.agent as string, w.pos, g, "utf8");
        }
      }
      const failureSize = f === 0 ? 0 : varintSize(FAILURE_TAG) + varintSize(f) + f;
      const agentSize = g === 0 ? 0 : varintSize(AGENT_TAG) + varintSize(g) + g;
      return (
        lenFieldSize(e) +
        int64FieldSize(packet.connectId) +
        int64FieldSize(packet.random) +
        failureSize +
        agentSize
      );
    }
    case PacketType.CLOSE_REQ:
      w?.int64Field(0x08, packet.connectId);
      return int64FieldSize(packet.connectId);
    case PacketType.CLOSE_RSP: {
      const e = Buffer.byteLength(packet.error);
      const f = packet.failure === undefined ? 0 : Buffer.byteLength(packet.failure);
      if (w) {
        w.stringField(0x0a, packet.error, e);
        w.int64Field(0x10, packet.connectId);
        if (f !== 0) {
          w.varint(FAILURE_TAG);
          w.varint(f);
          w.pos += w.buf.write(packet.failure as string, w.pos, f, "utf8");
        }
      }
      const failureSize = f === 0 ? 0 : varintSize(FAILURE_TAG) + varintSize(f) + f;
      return lenFieldSize(e) + int64FieldSize(packet.connectId) + failureSize;
    }
    case PacketType.DATA: {
      const e = packet.error.length === 0 ? 0 : Buffer.byteLength(packet.error);
      if (w) {
        w.int64Field(0x08, packet.connectId);
        w.stringField(0x12, packet.error, e);
        w.bytesField(0x1a, packet.data);
      }
      return int64FieldSize(packet.connectId) + lenFieldSize(e) + lenFieldSize(packet.data.byteLength);
    }
    case PacketType.DIAL_CLS:
      w?.int64Field(0x08, packet.random);
      return int64FieldSize(packet.random);
    case PacketType.DRAIN:
      return 0;
    case PacketType.KGW_CREDIT:
      if (w) {
        w.int64Field(0x08, packet.connectId);
        w.int64Field(0x10, packet.bytes);
      }
      return int64FieldSize(packet.connectId) + int64FieldSize(packet.bytes);
    case PacketType.KGW_SERVER_COUNT:
      w?.int64Field(0x08, packet.count);
      return int64FieldSize(packet.count);
  }
}

/** Encodes a packet into a freshly allocated buffer of exactly the right size. */
export function encodePacket(packet: Packet): Buffer {
  if (packet.type === "unknown") {
    throw new ProtocolError(`cannot encode packet of unknown type ${packet.rawType}`);
  }
  const bodySize = encodeBody(packet, null);
  const typeSize = packet.type === 0 ? 0 : 2; // tag + one-byte enum value; DIAL_REQ is the default
  const payloadTag = (PAYLOAD_FIELD[packet.type]! << 3) | WIRE_LEN;
  const buf = Buffer.allocUnsafe(typeSize + varintSize(payloadTag) + varintSize(bodySize) + bodySize);
  const w = new Writer(buf);
  if (typeSize !== 0) {
    buf[w.pos++] = 0x08;
    buf[w.pos++] = packet.type;
  }
  w.varint(payloadTag);
  w.varint(bodySize);
  encodeBody(packet, w);
  return buf;
}

/**
 * The bytes of an encoded DATA packet (no error) that come before its data, after `reserve`
 * bytes left free at the front for a caller's own prefix. `header + data` is byte for byte
 * `encodePacket(dataPacket(connectId, data))`: a sender can write the header and the caller's
 * buffer separately instead of copying the buffer into a protobuf.
 */
export function encodeDataPacketHeader(connectId: bigint, dataBytes: number, reserve = 0): Buffer {
  const bodySize = int64FieldSize(connectId) + lenFieldSize(dataBytes);
  const dataTagSize = dataBytes === 0 ? 0 : 1 + varintSize(dataBytes);
  const payloadTag = (PAYLOAD_FIELD[PacketType.DATA]! << 3) | WIRE_LEN;
  const headerSize =
    2 + varintSize(payloadTag) + varintSize(bodySize) + int64FieldSize(connectId) + dataTagSize;
  const buf = Buffer.allocUnsafe(reserve + headerSize);
  const w = new Writer(buf);
  w.pos = reserve;
  buf[w.pos++] = 0x08;
  buf[w.pos++] = PacketType.DATA;
  w.varint(payloadTag);
  w.varint(bodySize);
  w.int64Field(0x08, connectId);
  if (dataBytes !== 0) {
    buf[w.pos++] = 0x1a;
    w.varint(dataBytes);
  }
  return buf;
}

function decodeBody(type: PacketType, r: Reader): Packet {
  // Fields not set on the wire keep their proto3 defaults.
  let s1 = "";
  let s2 = "";
  let i1 = 0n;
  let i2 = 0n;
  let i3 = 0n;
  let bytes: Uint8Array = EMPTY;
  let egress: string | undefined;
  let failure: string | undefined;
  let agent: string | undefined;
  // Field layout per message (see konnectivity.proto): which field number carries what.
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === EGRESS_FIELD && type === PacketType.DIAL_REQ) {
      expectWireType(wire, WIRE_LEN, "egress");
      egress = r.string();
      continue;
    }
    if (field === FAILURE_FIELD && (type === PacketType.DIAL_RSP || type === PacketType.CLOSE_RSP)) {
      expectWireType(wire, WIRE_LEN, "failure");
      failure = r.string();
      continue;
    }
    if (field === AGENT_FIELD && type === PacketType.DIAL_RSP) {
      expectWireType(wire, WIRE_LEN, "agent");
      agent = r.string();
      continue;
    }
    switch (field > 3 ? 0 : type === PacketType.DATA ? field + 10 : field) {
      case 1:
        if (
          type === PacketType.CLOSE_REQ ||
          type === PacketType.DIAL_CLS ||
          type === PacketType.KGW_CREDIT ||
          type === PacketType.KGW_SERVER_COUNT
        ) {
          expectWireType(wire, WIRE_VARINT, "1");
          i1 = r.int64();
        } else if (type === PacketType.DRAIN) {
          r.skip(wire);
        } else {
          expectWireType(wire, WIRE_LEN, "1");
          s1 = r.string();
        }
        break;
      case 2:
        if (type === PacketType.DIAL_REQ) {
          expectWireType(wire, WIRE_LEN, "2");
          s2 = r.string();
        } else if (
          type === PacketType.DIAL_RSP ||
          type === PacketType.CLOSE_RSP ||
          type === PacketType.KGW_CREDIT
        ) {
          expectWireType(wire, WIRE_VARINT, "2");
          i2 = r.int64();
        } else {
          r.skip(wire);
        }
        break;
      case 3:
        if (type === PacketType.DIAL_REQ || type === PacketType.DIAL_RSP) {
          expectWireType(wire, WIRE_VARINT, "3");
          i3 = r.int64();
        } else {
          r.skip(wire);
        }
        break;
      // Data{connectID=1 int64, error=2 string, data=3 bytes}: offset by 10 to keep one switch.
      case 11:
        expectWireType(wire, WIRE_VARINT, "connectID");
        i1 = r.int64();
        break;
      case 12:
        expectWireType(wire, WIRE_LEN, "error");
        s2 = r.string();
        break;
      case 13: {
        expectWireType(wire, WIRE_LEN, "data");
        const [start, end] = r.lengthDelimited();
        bytes = r.buf.subarray(start, end);
        break;
      }
      default:
        r.skip(wire);
    }
  }
  switch (type) {
    case PacketType.DIAL_REQ:
      return egress === undefined
        ? { type, protocol: s1, address: s2, random: i3 }
        : { type, protocol: s1, address: s2, random: i3, egress };
    case PacketType.DIAL_RSP: {
      const p: DialResponsePacket = { type, error: s1, connectId: i2, random: i3 };
      if (failure !== undefined) p.failure = failure;
      if (agent !== undefined) p.agent = agent;
      return p;
    }
    case PacketType.CLOSE_REQ:
      return { type, connectId: i1 };
    case PacketType.CLOSE_RSP:
      return failure === undefined
        ? { type, error: s1, connectId: i2 }
        : { type, error: s1, connectId: i2, failure };
    case PacketType.DATA:
      return { type, connectId: i1, error: s2, data: bytes };
    case PacketType.DIAL_CLS:
      return { type, random: i1 };
    case PacketType.DRAIN:
      return { type };
    case PacketType.KGW_CREDIT:
      return { type, connectId: i1, bytes: i2 };
    case PacketType.KGW_SERVER_COUNT:
      return { type, count: i1 };
  }
}

const EMPTY = new Uint8Array(0);

/**
 * Decodes one serialized Packet. Throws ProtocolError on malformed protobuf or on a payload that
 * contradicts the packet type; returns an `unknown` packet for types newer than this build.
 */
export function decodePacket(buf: Buffer): Packet {
  const r = new Reader(buf, 0, buf.length);
  let rawType = 0;
  let payloadField = 0;
  let payloadStart = 0;
  let payloadEnd = 0;
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1) {
      expectWireType(wire, WIRE_VARINT, "type");
      // Enums are int32 on the wire; a negative value arrives as a ten-byte varint.
      rawType = Number(BigInt.asIntN(32, r.int64()));
    } else if (
      (field >= 2 && field <= 8) ||
      field === PAYLOAD_FIELD[PacketType.KGW_CREDIT] ||
      field === PAYLOAD_FIELD[PacketType.KGW_SERVER_COUNT]
    ) {
      expectWireType(wire, WIRE_LEN, `payload ${field}`);
      // Last oneof member on the wire wins, as in every protobuf implementation.
      [payloadStart, payloadEnd] = r.lengthDelimited();
      payloadField = field;
    } else {
      r.skip(wire);
    }
  }
  if (!Object.hasOwn(PAYLOAD_FIELD, rawType)) return { type: "unknown", rawType };
  const type = rawType as PacketType;
  if (payloadField !== 0 && payloadField !== PAYLOAD_FIELD[type]) {
    throw new ProtocolError(`packet of type ${type} carries payload field ${payloadField}`);
  }
  return decodeBody(type, new Reader(buf, payloadStart, payloadEnd));
}
