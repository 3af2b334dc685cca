/**
 * google.rpc.Status in grpc-status-details-bin (lib/proto/rpc-status.ts), checked against
 * protobufjs reading googleapis' own definitions of the messages: what a client with those protos
 * (grpc-go's status.FromError, grpc-java's StatusProto) decodes is what we meant.
 */
import protobuf from "protobufjs";
import { describe, expect, it } from "vitest";
import { ProtocolError } from "../../lib/errors.js";
import {
  decodeRpcStatus,
  ERROR_INFO_TYPE,
  encodeRpcStatus,
  QUOTA_FAILURE_TYPE,
  RETRY_INFO_TYPE,
  type RpcStatus,
} from "../../lib/proto/rpc-status.js";

// googleapis: google/rpc/status.proto, error_details.proto; google/protobuf/any.proto, duration.proto.
const { root } = protobuf.parse(`
  syntax = "proto3";
  package google.rpc;
  message Any { string type_url = 1; bytes value = 2; }
  message Duration { int64 seconds = 1; int32 nanos = 2; }
  message Status { int32 code = 1; string message = 2; repeated Any details = 3; }
  message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
  message QuotaFailure {
    message Violation { string subject = 1; string description = 2; }
    repeated Violation violations = 1;
  }
  message RetryInfo { Duration retry_delay = 1; }
`);
const type = (name: string) => root.lookupType(`google.rpc.${name}`);

const FULL: RpcStatus = {
  code: 8,
  message: "tenant acme has 2 tunnels open, its quota (maxTunnels 2)",
  errorInfo: { reason: "ERR_QUOTA", domain: "kgw.dev", metadata: { quota: "maxTunnels", limit: "2" } },
  quotaFailure: [{ subject: "maxTunnels", description: "limit 2" }],
  retryDelaySeconds: 3,
};

describe("google.rpc.Status for refusals", () => {
  it("is what googleapis' definitions decode: code, message, ErrorInfo, QuotaFailure, RetryInfo", () => {
    const status = type("Status").toObject(type("Status").decode(encodeRpcStatus(FULL)), {
      longs: Number,
    }) as {
      code: number;
      message: string;
      details: { typeUrl: string; value: Uint8Array }[];
    };
    expect(status.code).toBe(8);
    expect(status.message).toBe(FULL.message);
    expect(status.details.map((d) => d.typeUrl)).toEqual([
      ERROR_INFO_TYPE,
      QUOTA_FAILURE_TYPE,
      RETRY_INFO_TYPE,
    ]);
    const [info, quota, retry] = status.details.map((d, i) =>
      type(["ErrorInfo", "QuotaFailure", "RetryInfo"][i]!).toObject(
        type(["ErrorInfo", "QuotaFailure", "RetryInfo"][i]!).decode(d.value),
        { longs: Number },
      ),
    );
    expect(info).toEqual({
      reason: "ERR_QUOTA",
      domain: "kgw.dev",
      metadata: { quota: "maxTunnels", limit: "2" },
    });
    expect(quota).toEqual({ violations: [{ subject: "maxTunnels", description: "limit 2" }] });
    expect(retry).toEqual({ retryDelay: { seconds: 3 } });
  });

  it("reads back what it writes, and what googleapis' encoder writes", () => {
    expect(decodeRpcStatus(encodeRpcStatus(FULL))).toEqual(FULL);
    const minimal: RpcStatus = { code: 16, message: "authentication required" };
    expect(decodeRpcStatus(encodeRpcStatus(minimal))).toEqual(minimal);
    const theirs = type("Status")
      .encode({
        code: 7,
        message: "denied",
        details: [
          {
            typeUrl: ERROR_INFO_TYPE,
            value: type("ErrorInfo")
              .encode({ reason: "R", domain: "d", metadata: { a: "b" } })
              .finish(),
          },
          // A detail we do not know is skipped, not an error.
          { typeUrl: "type.googleapis.com/google.rpc.DebugInfo", value: Buffer.from([0x0a, 0x01, 0x78]) },
        ],
      })
      .finish();
    expect(decodeRpcStatus(Buffer.from(theirs))).toEqual({
      code: 7,
      message: "denied",
      errorInfo: { reason: "R", domain: "d", metadata: { a: "b" } },
    });
  });

  it("refuses malformed and oversized details with a ProtocolError, never a crash", () => {
    const good = encodeRpcStatus(FULL);
    for (let cut = 1; cut < good.length; cut++) {
      try {
        decodeRpcStatus(good.subarray(0, cut));
      } catch (err) {
        expect(err).toBeInstanceOf(ProtocolError);
      }
    }
    expect(() => decodeRpcStatus(Buffer.from([0x08 | 0x02, 0x05]))).toThrow(ProtocolError); // code as LEN
    expect(() => decodeRpcStatus(Buffer.alloc(64 * 1024, 0x08))).toThrow(ProtocolError);
  });

  it("refuses to write a status or delay that is not a whole non-negative number", () => {
    expect(() => encodeRpcStatus({ code: -1, message: "" })).toThrow(RangeError);
    expect(() => encodeRpcStatus({ code: 8, message: "", retryDelaySeconds: 0.5 })).toThrow(RangeError);
  });
});
