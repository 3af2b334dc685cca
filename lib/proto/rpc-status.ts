/**
 * gRPC's rich error model (google.rpc.Status in `grpc-status-details-bin`), for the three detail
 * messages a refusal carries: ErrorInfo (code and the rule or quota), QuotaFailure (which quota)
 * and RetryInfo (when to try again). Hand-written like the packet codec, for these messages
 * only: a client with googleapis' protos decodes them as it would any server's.
 *
 *   Status       { int32 code = 1; string message = 2; repeated Any details = 3; }
 *   Any          { string type_url = 1; bytes value = 2; }
 *   ErrorInfo    { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
 *   QuotaFailure { repeated Violation violations = 1; }  Violation { subject = 1; description = 2; }
 *   RetryInfo    { Duration retry_delay = 1; }           Duration { int64 seconds = 1; int32 nanos = 2; }
 */
import { ProtocolError } from "../errors.js";
import { expectWireType, Reader, WIRE_LEN, WIRE_VARINT } from "./wire.js";

export const ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo";
export const QUOTA_FAILURE_TYPE = "type.googleapis.com/google.rpc.QuotaFailure";
export const RETRY_INFO_TYPE = "type.googleapis.com/google.rpc.RetryInfo";

export interface RpcStatus {
  code: number;
  message: string;
  errorInfo?: { reason: string; domain: string; metadata: Record<string, string> };
  quotaFailure?: { subject: string; description: string }[];
  retryDelaySeconds?: number;
}

/** The largest details we read back: ours are a few hundred bytes. */
const MAX_STATUS_BYTES = 16 * 1024;

function varint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
  return Buffer.from(out);
}

const len = (field: number, body: Buffer): Buffer =>
  Buffer.concat([varint((field << 3) | WIRE_LEN), varint(body.length), body]);
const str = (field: number, s: string): Buffer => len(field, Buffer.from(s, "utf8"));
const num = (field: number, n: number): Buffer =>
  n === 0 ? Buffer.alloc(0) : Buffer.concat([varint((field << 3) | WIRE_VARINT), varint(n)]);
/** A google.protobuf.Any (type_url = 1, value = 2) as field 3 of google.rpc.Status (its details). */
const packAny = (typeUrl: string, value: Buffer): Buffer =>
  len(3, Buffer.concat([str(1, typeUrl), len(2, value)]));

export function encodeRpcStatus(s: RpcStatus): Buffer {
  if (!Number.isInteger(s.code) || s.code < 0) throw new RangeError(`invalid gRPC status ${s.code}`);
  const parts = [num(1, s.code), str(2, s.message)];
  if (s.errorInfo) {
    const entries = Object.entries(s.errorInfo.metadata).map(([k, v]) =>
      len(3, Buffer.concat([str(1, k), str(2, v)])),
    );
    parts.push(
      packAny(
        ERROR_INFO_TYPE,
        Buffer.concat([str(1, s.errorInfo.reason), str(2, s.errorInfo.domain), ...entries]),
      ),
    );
  }
  if (s.quotaFailure) {
    const violations = s.quotaFailure.map((v) =>
      len(1, Buffer.concat([str(1, v.subject), str(2, v.description)])),
    );
    parts.push(packAny(QUOTA_FAILURE_TYPE, Buffer.concat(violations)));
  }
  if (s.retryDelaySeconds !== undefined) {
    if (!Number.isInteger(s.retryDelaySeconds) || s.retryDelaySeconds < 0) {
      throw new RangeError(`invalid retry delay ${s.retryDelaySeconds}`);
    }
    parts.push(packAny(RETRY_INFO_TYPE, len(1, num(1, s.retryDelaySeconds))));
  }
  return Buffer.concat(parts);
}

/** Calls `field` for each field of the message in buf[start, end). */
function fields(
  buf: Buffer,
  start: number,
  end: number,
  field: (no: number, wire: number, r: Reader) => void,
) {
  const r = new Reader(buf, start, end);
  while (r.pos < end) {
    const tag = r.uint32();
    const before = r.pos;
    field(tag >>> 3, tag & 7, r);
    if (r.pos === before) r.skip(tag & 7);
  }
}

function strings(buf: Buffer, start: number, end: number): [string, string] {
  const out: [string, string] = ["", ""];
  fields(buf, start, end, (no, wire, r) => {
    if (no !== 1 && no !== 2) return;
    expectWireType(wire, WIRE_LEN, String(no));
    out[no - 1] = r.string();
  });
  return out;
}

/** Reads a Status written by encodeRpcStatus (or any server); unknown details are skipped. */
export function decodeRpcStatus(buf: Buffer): RpcStatus {
  if (buf.length > MAX_STATUS_BYTES) throw new ProtocolError(`status details of ${buf.length} bytes`);
  const status: RpcStatus = { code: 0, message: "" };
  fields(buf, 0, buf.length, (no, wire, r) => {
    if (no === 1) {
      expectWireType(wire, WIRE_VARINT, "code");
      status.code = Number(r.int64());
    } else if (no === 2) {
      expectWireType(wire, WIRE_LEN, "message");
      status.message = r.string();
    } else if (no === 3) {
      expectWireType(wire, WIRE_LEN, "details");
      const [start, end] = r.lengthDelimited();
      let typeUrl = "";
      let value: [number, number] = [0, 0];
      fields(buf, start, end, (n, w, rr) => {
        if (n === 1 && w === WIRE_LEN) typeUrl = rr.string();
        else if (n === 2 && w === WIRE_LEN) value = rr.lengthDelimited();
      });
      readDetail(buf, typeUrl, value, status);
    }
  });
  return status;
}

function readDetail(buf: Buffer, typeUrl: string, [start, end]: [number, number], status: RpcStatus): void {
  if (typeUrl === ERROR_INFO_TYPE) {
    const info = { reason: "", domain: "", metadata: {} as Record<string, string> };
    fields(buf, start, end, (no, wire, r) => {
      if (wire !== WIRE_LEN) return;
      if (no === 1) info.reason = r.string();
      else if (no === 2) info.domain = r.string();
      else if (no === 3) {
        const [s, e] = r.lengthDelimited();
        const [k, v] = strings(buf, s, e);
        info.metadata[k] = v;
      }
    });
    status.errorInfo = info;
  } else if (typeUrl === QUOTA_FAILURE_TYPE) {
    const violations: { subject: string; description: string }[] = [];
    fields(buf, start, end, (no, wire, r) => {
      if (no !== 1 || wire !== WIRE_LEN) return;
      const [s, e] = r.lengthDelimited();
      const [subject, description] = strings(buf, s, e);
      violations.push({ subject, description });
    });
    status.quotaFailure = violations;
  } else if (typeUrl === RETRY_INFO_TYPE) {
    let seconds = 0;
    fields(buf, start, end, (no, wire, r) => {
      if (no !== 1 || wire !== WIRE_LEN) return;
      const [s, e] = r.lengthDelimited();
      fields(buf, s, e, (n, w, rr) => {
        if (n === 1 && w === WIRE_VARINT) seconds = Number(rr.int64());
      });
    });
    status.retryDelaySeconds = seconds;
  }
}
