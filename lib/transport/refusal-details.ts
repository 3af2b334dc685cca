/**
 * What a refused or failed dial or call tells its caller, the same on every frontend: the error
 * code, the reason (the error's message), and for a policy refusal the egress rule that refused,
 * for a quota the quota's name, its limit and when to try again. Read from the typed error only,
 * never from a request or a record, so it holds nothing the caller did not already have: its own
 * tenant's rule labels and limits, its own target. docs/TENANCY.md#refusals documents every form.
 *
 *  - CONNECT: headers X-Kgw-Error-Code, X-Kgw-Rule, X-Kgw-Quota, X-Kgw-Limit, Retry-After, and a
 *    JSON body `{code, reason, rule?, quota?, limit?, retryAfterSeconds?}`;
 *  - a DIAL_RSP error: the error's message as before (upstream clients may match its start),
 *    then ` [kgw code=… rule=… quota=… limit=… retry-after=…]`;
 *  - a call-level gRPC status: trailing metadata kgw-error-code, kgw-rule, kgw-quota, kgw-limit,
 *    retry-after, and `grpc-status-details-bin` (google.rpc.Status with ErrorInfo, QuotaFailure,
 *    RetryInfo: lib/proto/rpc-status.ts).
 */
import {
  DestinationNotAllowedError,
  type ErrorCode,
  type GatewayError,
  httpStatusFor,
  QuotaExceededError,
} from "../errors.js";
import { encodeRpcStatus } from "../proto/rpc-status.js";
import { formatConnectResponse } from "./http-connect-parser.js";

/** ErrorInfo.domain of our refusals. */
export const REFUSAL_DOMAIN = "kgw.dev";

export interface RefusalDetails {
  code: ErrorCode;
  reason: string;
  /** The egress rule that refused (judge.ts's labels), for a policy refusal the server judged. */
  rule?: string;
  /** The quota that refused (lib/tenancy/quotas.ts's names). */
  quota?: string;
  /** That quota's value for the caller's tenant. */
  limit?: number;
  retryAfterSeconds?: number;
}

export function refusalDetails(err: GatewayError): RefusalDetails {
  const d: RefusalDetails = { code: err.code, reason: err.message };
  if (err instanceof DestinationNotAllowedError && err.rule !== undefined) d.rule = err.rule;
  if (err instanceof QuotaExceededError) {
    d.quota = err.quota;
    if (err.details.limit !== undefined) d.limit = err.details.limit;
    if (err.details.retryAfterSeconds !== undefined) d.retryAfterSeconds = err.details.retryAfterSeconds;
  }
  return d;
}

/** The CONNECT response's headers for `d` (values are our labels and numbers: no CR or LF). */
export function connectRefusalHeaders(d: RefusalDetails): Record<string, string> {
  const h: Record<string, string> = { "X-Kgw-Error-Code": d.code };
  if (d.rule !== undefined) h["X-Kgw-Rule"] = d.rule;
  if (d.quota !== undefined) h["X-Kgw-Quota"] = d.quota;
  if (d.limit !== undefined) h["X-Kgw-Limit"] = String(d.limit);
  if (d.retryAfterSeconds !== undefined) h["Retry-After"] = String(d.retryAfterSeconds);
  return h;
}

/** The CONNECT response's body: one line of JSON. */
export function connectRefusalBody(d: RefusalDetails): string {
  return `${JSON.stringify(d)}\n`;
}

/**
 * The whole CONNECT answer to a dial or request refused with `err`: upstream's status for it
 * (httpStatusFor), the headers and the body; `extra` headers too (Proxy-Authenticate on a 407).
 */
export function connectRefusalResponse(err: GatewayError, extra: Record<string, string> = {}): Buffer {
  const d = refusalDetails(err);
  return formatConnectResponse(
    httpStatusFor(err),
    undefined,
    { ...connectRefusalHeaders(d), ...extra },
    { contentType: "application/json", text: connectRefusalBody(d) },
  );
}

/** A DIAL_RSP error's text: the message first, unchanged, then the details in brackets. */
export function dialErrorText(err: GatewayError): string {
  const d = refusalDetails(err);
  let tail = `code=${d.code}`;
  if (d.rule !== undefined) tail += ` rule=${d.rule}`;
  if (d.quota !== undefined) tail += ` quota=${d.quota}`;
  if (d.limit !== undefined) tail += ` limit=${d.limit}`;
  if (d.retryAfterSeconds !== undefined) tail += ` retry-after=${d.retryAfterSeconds}`;
  return `${err.message} [kgw ${tail}]`;
}

/** Trailing metadata of a call refused with gRPC status `grpcCode` (a trailers-only answer). */
export function grpcRefusalTrailers(grpcCode: number, err: GatewayError): Record<string, string> {
  const d = refusalDetails(err);
  const t: Record<string, string> = { "kgw-error-code": d.code };
  const metadata: Record<string, string> = {};
  if (d.rule !== undefined) t["kgw-rule"] = metadata.rule = d.rule;
  if (d.quota !== undefined) t["kgw-quota"] = metadata.quota = d.quota;
  if (d.limit !== undefined) t["kgw-limit"] = metadata.limit = String(d.limit);
  if (d.retryAfterSeconds !== undefined) t["retry-after"] = String(d.retryAfterSeconds);
  const status = encodeRpcStatus({
    code: grpcCode,
    message: d.reason,
    errorInfo: { reason: d.code, domain: REFUSAL_DOMAIN, metadata },
    ...(d.quota !== undefined
      ? {
          quotaFailure: [
            { subject: d.quota, description: d.limit === undefined ? d.reason : `limit ${d.limit}` },
          ],
        }
      : {}),
    ...(d.retryAfterSeconds !== undefined ? { retryDelaySeconds: d.retryAfterSeconds } : {}),
  });
  // -bin metadata travels base64 (gRPC over HTTP/2); unpadded, as the spec allows and grpc-go writes.
  t["grpc-status-details-bin"] = status.toString("base64").replace(/=+$/, "");
  return t;
}
