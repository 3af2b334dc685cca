/**
 * What a refusal tells its caller (lib/server/refusal-details.ts): the same code, rule or quota,
 * limit and retry delay on CONNECT (headers and a JSON body), in a DIAL_RSP error (after the
 * message, which stays first for upstream clients) and in a refused call's trailers.
 */
import { describe, expect, it } from "vitest";
import {
  DestinationNotAllowedError,
  GrpcCode,
  NoAgentError,
  ProxyAuthRequiredError,
  QuotaExceededError,
} from "../../lib/errors.js";
import { decodeRpcStatus } from "../../lib/proto/rpc-status.js";
import { formatConnectResponse } from "../../lib/transport/http-connect-parser.js";
import {
  connectRefusalResponse,
  dialErrorText,
  grpcRefusalTrailers,
  refusalDetails,
} from "../../lib/transport/refusal-details.js";

const quota = new QuotaExceededError(
  "maxTunnels",
  "tenant acme has 5 tunnels open, its quota (maxTunnels 5)",
  {
    tenant: "acme",
    limit: 5,
    retryAfterSeconds: 1,
  },
);
const policy = new DestinationNotAllowedError(
  "destination not allowed: no rule of the tenant's egress policy allows 192.0.2.1:22",
  "no_rule",
);

describe("refusal details", () => {
  it("read the rule, the quota, its limit and the delay from the typed error only (never the tenant)", () => {
    expect(refusalDetails(quota)).toEqual({
      code: "ERR_QUOTA",
      reason: quota.message,
      quota: "maxTunnels",
      limit: 5,
      retryAfterSeconds: 1,
    });
    expect(refusalDetails(policy)).toEqual({
      code: "ERR_DESTINATION_NOT_ALLOWED",
      reason: policy.message,
      rule: "no_rule",
    });
    // The agent's own refusal comes as text only: no rule is made up for it.
    expect(
      refusalDetails(new DestinationNotAllowedError("dial tcp x: destination not allowed: y")),
    ).not.toHaveProperty("rule");
  });

  it("a CONNECT refusal: upstream's status, the headers, a JSON body whose length is declared", () => {
    const text = connectRefusalResponse(quota).toString("utf8");
    const [head, body] = text.split("\r\n\r\n");
    const lines = head!.split("\r\n");
    expect(lines[0]).toBe("HTTP/1.1 429 Too Many Requests");
    expect(lines.slice(1)).toEqual(
      expect.arrayContaining([
        "X-Kgw-Error-Code: ERR_QUOTA",
        "X-Kgw-Quota: maxTunnels",
        "X-Kgw-Limit: 5",
        "Retry-After: 1",
        "Connection: close",
        "Content-Type: application/json",
        `Content-Length: ${Buffer.byteLength(body!)}`,
      ]),
    );
    expect(JSON.parse(body!)).toEqual({ ...refusalDetails(quota) });
    const forbidden = connectRefusalResponse(policy).toString("utf8");
    expect(forbidden).toMatch(/^HTTP\/1\.1 403 Forbidden\r\n/);
    expect(forbidden).toMatch(/\r\nX-Kgw-Rule: no_rule\r\n/);
    expect(forbidden).not.toContain("Retry-After");
  });

  it("a 407 keeps its Proxy-Authenticate; a target with non-ASCII text keeps the length in bytes", () => {
    const err = new ProxyAuthRequiredError("a caller credential is required");
    const text = connectRefusalResponse(err, { "Proxy-Authenticate": 'Bearer realm="kgw"' }).toString("utf8");
    expect(text).toMatch(/\r\nProxy-Authenticate: Bearer realm="kgw"\r\n/);
    const odd = new DestinationNotAllowedError(
      "destination not allowed: no rule allows bücher.example:443",
      "no_rule",
    );
    const raw = connectRefusalResponse(odd);
    const split = raw.indexOf("\r\n\r\n");
    const length = Number(/Content-Length: (\d+)/.exec(raw.subarray(0, split).toString("latin1"))![1]);
    expect(length).toBe(raw.length - split - 4);
  });

  it("a 2xx takes no body", () => {
    expect(() => formatConnectResponse(200, undefined, {}, { contentType: "text/plain", text: "x" })).toThrow(
      TypeError,
    );
  });

  it("a DIAL_RSP error starts with the message, unchanged, and ends with the details", () => {
    expect(dialErrorText(quota)).toBe(
      `${quota.message} [kgw code=ERR_QUOTA quota=maxTunnels limit=5 retry-after=1]`,
    );
    expect(dialErrorText(policy)).toBe(
      `${policy.message} [kgw code=ERR_DESTINATION_NOT_ALLOWED rule=no_rule]`,
    );
    const none = new NoAgentError();
    expect(dialErrorText(none).startsWith(none.message)).toBe(true);
  });

  it("a refused call's trailers and status details say the same", () => {
    const t = grpcRefusalTrailers(GrpcCode.RESOURCE_EXHAUSTED, quota);
    expect(t).toMatchObject({
      "kgw-error-code": "ERR_QUOTA",
      "kgw-quota": "maxTunnels",
      "kgw-limit": "5",
      "retry-after": "1",
    });
    expect(decodeRpcStatus(Buffer.from(t["grpc-status-details-bin"]!, "base64"))).toEqual({
      code: GrpcCode.RESOURCE_EXHAUSTED,
      message: quota.message,
      errorInfo: { reason: "ERR_QUOTA", domain: "kgw.dev", metadata: { quota: "maxTunnels", limit: "5" } },
      quotaFailure: [{ subject: "maxTunnels", description: "limit 5" }],
      retryDelaySeconds: 1,
    });
  });
});
