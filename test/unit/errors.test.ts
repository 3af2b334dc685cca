import { describe, expect, it } from "vitest";
import {
  agentDialError,
  GrpcCode,
  grpcStatusFor,
  httpStatusFor,
  InternalError,
  NoAgentError,
  toGatewayError,
} from "../../lib/errors.js";

describe("dial errors reported by agents map to HTTP status as upstream maps them", () => {
  it.each([
    ["dial tcp 10.0.0.5:10250: i/o timeout", 504, "ERR_DIAL_TIMEOUT"],
    ["context deadline exceeded", 504, "ERR_DIAL_TIMEOUT"],
    ["dial tcp 10.0.0.5:10250: socket: too many open files", 503, "ERR_NO_AGENT"],
    ["dial tcp 10.0.0.5:10250: connect: connection refused", 502, "ERR_DIAL_FAILED"],
    ["dial tcp: lookup nowhere.invalid: no such host", 502, "ERR_DIAL_FAILED"],
    // Our agent's policy refusal (lib/agent/destination-policy.ts), whatever the host name says.
    [
      "dial tcp metadata.google.internal:80: destination not allowed: 169.254.169.254 is link-local",
      403,
      "ERR_DESTINATION_NOT_ALLOWED",
    ],
    [
      "dial tcp timeout.example:80: destination not allowed: fe80::1 is link-local",
      403,
      "ERR_DESTINATION_NOT_ALLOWED",
    ],
  ])("%s → %d", (text, status, code) => {
    const err = agentDialError(text);
    expect(httpStatusFor(err)).toBe(status);
    expect(err.code).toBe(code);
    expect(err.message).toBe(text);
  });

  it("maps unknown failures to 500 and UNAVAILABLE for a missing agent", () => {
    expect(httpStatusFor(new Error("boom"))).toBe(500);
    expect(grpcStatusFor(new NoAgentError())).toBe(14);
  });

  it("maps a refused destination to PERMISSION_DENIED on gRPC", () => {
    expect(grpcStatusFor(agentDialError("dial tcp 169.254.169.254:80: destination not allowed"))).toBe(7);
  });
});

describe("a catch site's failure as a typed error", () => {
  it("keeps one of ours as it is", () => {
    const err = new NoAgentError("no agent for tenant acme");
    expect(toGatewayError(err)).toBe(err);
  });

  it("wraps anything else as an internal failure, 500 and INTERNAL, with the original as cause", () => {
    const bug = new TypeError("cannot read properties of undefined");
    const err = toGatewayError(bug);
    expect(err).toBeInstanceOf(InternalError);
    expect(err).toMatchObject({ code: "ERR_INTERNAL", message: bug.message, cause: bug });
    expect(httpStatusFor(err)).toBe(500);
    expect(grpcStatusFor(err)).toBe(GrpcCode.INTERNAL);
    expect(toGatewayError("a thrown string").message).toBe("a thrown string");
  });
});
