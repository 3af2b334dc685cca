/**
 * Typed errors with fixed codes. Every failure the gateway reports to a peer is one of these;
 * callers switch on `code`, never on message text. The codes, the base class and the only
 * mapping from a failure to a wire status (`httpStatusFor`, `grpcStatusFor`) are in
 * error-codes.ts, re-exported here so that every failure is imported from one place.
 */

import { type ErrorCode, GatewayError } from "./error-codes.js";

export {
  type ErrorCode,
  GatewayError,
  GrpcCode,
  grpcCodeName,
  grpcStatusFor,
  httpStatusFor,
} from "./error-codes.js";

/** A flag, file or environment value is missing or invalid. */
export class ConfigError extends GatewayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_CONFIG", message, options);
  }
}

/** A peer sent something we cannot parse (bad CONNECT target, malformed request line). */
export class BadRequestError extends GatewayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_BAD_REQUEST", message, options);
  }
}

/** An HTTP request other than CONNECT reached a tunnel listener. */
export class MethodNotAllowedError extends GatewayError {
  constructor(readonly method: string) {
    super("ERR_METHOD_NOT_ALLOWED", `method ${method} is not allowed; only CONNECT is served`);
  }
}

/** The request head exceeded the size limit. */
export class HeadersTooLargeError extends GatewayError {
  constructor(readonly limit: number) {
    super("ERR_HEADERS_TOO_LARGE", `request head exceeds ${limit} bytes`);
  }
}

/** The request head did not arrive in time (slow client). */
export class HeadersTimeoutError extends GatewayError {
  constructor(readonly timeoutMs: number) {
    super("ERR_HEADERS_TIMEOUT", `request head not received within ${timeoutMs}ms`);
  }
}

/** The peer presented no credentials or invalid ones. */
export class UnauthenticatedError extends GatewayError {
  constructor(message = "authentication required", options?: { cause?: unknown }) {
    super("ERR_UNAUTHENTICATED", message, options);
  }
}

/**
 * A CONNECT caller showed no credential where one is required (tenant mode takes a caller token
 * in Proxy-Authorization): 407, so that proxy clients know to offer one.
 */
export class ProxyAuthRequiredError extends GatewayError {
  constructor(message: string) {
    super("ERR_PROXY_AUTH_REQUIRED", message);
  }
}

/**
 * The credential a live stream or tunnel was authenticated with has since been revoked, has
 * expired, or its tenant was deleted: what was open on it is closed.
 */
export class CredentialRevokedError extends UnauthenticatedError {
  /**
   * `reason`: why (a RefusalReason of lib/tenancy/errors.ts: "revoked", "tenant-deleted", ...),
   * named in the message too: the peer whose stream is closed proved the credential, so it may
   * know what became of it.
   */
  constructor(readonly reason?: string) {
    super(
      `the credential this connection was authenticated with is no longer valid${reason ? ` (${reason})` : ""}`,
    );
  }
}

/** An authenticated caller asked for something policy does not allow. */
export class ForbiddenError extends GatewayError {
  constructor(message: string) {
    super("ERR_FORBIDDEN", message);
  }
}

/**
 * A tenant is at one of its quotas (lib/tenancy/quotas.ts): 429 on CONNECT, RESOURCE_EXHAUSTED
 * on gRPC, a DIAL_RSP error to a gRPC caller's dial. `quota` names which, for metrics and audit.
 */
export class QuotaExceededError extends GatewayError {
  /**
   * `limit`: the quota's value for this tenant, told to the caller (it is the caller's own);
   * `retryAfterSeconds`: when to try again (Retry-After, RetryInfo), from the quota's state where
   * it can be computed; `tenant`: whose quota, for the log.
   */
  constructor(
    readonly quota: string,
    message: string,
    readonly details: { limit?: number; retryAfterSeconds?: number; tenant?: string } = {},
  ) {
    super("ERR_QUOTA", message);
  }
}

/** No agent is connected that can serve the dial. */
export class NoAgentError extends GatewayError {
  constructor(message = "no agent available") {
    super("ERR_NO_AGENT", message);
  }
}

/** The agent serving a dial or connection disconnected. */
export class AgentGoneError extends GatewayError {
  constructor(agentId: string) {
    super("ERR_AGENT_GONE", `agent ${agentId} disconnected`);
  }
}

/**
 * The agent stopped answering liveness probes: a dial waiting on it is abandoned, or (silent
 * past the liveness timeout) its stream was closed.
 */
export class AgentUnresponsiveError extends GatewayError {
  constructor(agentId: string, silentMs: number, disconnected: boolean) {
    const silent = `${(silentMs / 1000).toFixed(1)}s`;
    super(
      "ERR_AGENT_GONE",
      disconnected
        ? `agent ${agentId} sent nothing for ${silent} and was disconnected`
        : `agent ${agentId} stopped answering (nothing for ${silent}); the dial was abandoned`,
    );
  }
}

/** The agent tried the backend and reported failure (refused, unreachable, DNS). */
export class DialFailedError extends GatewayError {
  constructor(message: string) {
    super("ERR_DIAL_FAILED", message);
  }
}

/** The dial did not complete in time: ours (`timeoutMs`), or the agent's own connect timeout. */
export class DialTimeoutError extends GatewayError {
  constructor(
    readonly timeoutMs: number | null,
    message = `dial timed out after ${timeoutMs}ms`,
  ) {
    super("ERR_DIAL_TIMEOUT", message);
  }
}

/**
 * The agent refused the destination by policy (today: link-local addresses such as cloud
 * metadata, lib/agent/destination-policy.ts). The message carries DESTINATION_NOT_ALLOWED.
 */
export class DestinationNotAllowedError extends GatewayError {
  /**
   * `rule`: which part of the tenant's egress policy refused (lib/egress/judge.ts's labels:
   * loopback, link_local, no_rule, malformed; no_tenant), when the server judged it; a refusal
   * the agent reported carries only its text.
   */
  constructor(
    message: string,
    readonly rule?: string,
  ) {
    super("ERR_DESTINATION_NOT_ALLOWED", message);
  }
}

/**
 * The words every destination refusal carries, so that the server can type the refusal from the
 * DIAL_RSP's free text (agentDialError). Written by the agent, read by the server: keep as is.
 */
export const DESTINATION_NOT_ALLOWED = "destination not allowed";

/**
 * Codes that refuse a caller for who it is or what it asks (its credential, the tenant's egress
 * policy or quota), as opposed to something failing on the way. A client repeating them is
 * refused more cheaply each time (lib/transport/refusal-throttle.ts), and they are logged at
 * debug: each one is counted, and audited when it is a dial.
 */
const REFUSAL_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  "ERR_UNAUTHENTICATED",
  "ERR_PROXY_AUTH_REQUIRED",
  "ERR_FORBIDDEN",
  "ERR_QUOTA",
  "ERR_DESTINATION_NOT_ALLOWED",
]);

export function isRefusal(err: GatewayError): boolean {
  return REFUSAL_CODES.has(err.code);
}

/** The agent's host ran out of file descriptors; upstream answers 503 for it. */
export class AgentOverloadedError extends GatewayError {
  constructor(message: string) {
    super("ERR_NO_AGENT", message);
  }
}

/**
 * Types a dial error an agent reported. The protocol carries it as free text (Go's error string),
 * so this is the one place that reads it, with upstream's own rules (mapDialErrorToHTTPStatus):
 * a timeout is 504, "too many open files" 503, anything else 502; plus our agent's policy
 * refusal, 403.
 */
export function agentDialError(text: string): GatewayError {
  // First: a refused destination's text quotes the address, which may contain anything.
  if (text.includes(DESTINATION_NOT_ALLOWED)) return new DestinationNotAllowedError(text);
  if (/timeout|deadline exceeded/i.test(text)) return new DialTimeoutError(null, text);
  if (/too many open files/i.test(text)) return new AgentOverloadedError(text);
  return new DialFailedError(text);
}

/** The dial was cancelled by the caller (DIAL_CLS or the caller went away). */
export class DialCancelledError extends GatewayError {
  constructor(message = "dial cancelled") {
    super("ERR_DIAL_CANCELLED", message);
  }
}

/**
 * An established connection ended with an error from the other side (CLOSE_RSP with error
 * text: its agent went away, its backend failed) rather than a normal close: what was received
 * may be incomplete.
 */
export class ConnectionBrokenError extends GatewayError {
  constructor(message: string) {
    super("ERR_CONNECTION_BROKEN", message);
  }
}

/** A packet named a connectID this stream does not own. */
export class UnknownConnectionError extends GatewayError {
  constructor(readonly connectId: bigint) {
    super("ERR_UNKNOWN_CONNECTION", `unknown connectID ${connectId}`);
  }
}

/** A peer broke the tunnel protocol (malformed packet, packet not valid in this direction). */
export class ProtocolError extends GatewayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_PROTOCOL", message, options);
  }
}

/** A peer asked for something this server does not implement (a gRPC method, an encoding). */
export class UnsupportedError extends GatewayError {
  constructor(message: string) {
    super("ERR_UNSUPPORTED", message);
  }
}

/** A gRPC message over the size limit. */
export class MessageTooLargeError extends GatewayError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super("ERR_MESSAGE_TOO_LARGE", `message of ${bytes} bytes is larger than the limit of ${limit}`);
  }
}

/** A gRPC call outlived the deadline its caller set (grpc-timeout). */
export class DeadlineExceededError extends GatewayError {
  constructor(readonly ms: number) {
    super("ERR_DEADLINE_EXCEEDED", `deadline of ${ms}ms exceeded`);
  }
}

/** The instance is draining and accepts no new work. */
export class ShuttingDownError extends GatewayError {
  constructor() {
    super("ERR_SHUTTING_DOWN", "gateway is shutting down");
  }
}

/**
 * A drain cut the tunnel: the gateway's drain ran out (--graceful-shutdown-timeout) with it still
 * open, or its agent drained (sent DRAIN, then ended its stream). A rolling deployment or an
 * agent's rollout, not a failure of the agent: audited as `drained`, which the dial-failure alarm
 * does not count (docs/TENANCY.md, "Audit").
 */
export class DrainedError extends GatewayError {
  constructor(message: string) {
    super("ERR_DRAINED", message);
  }
}

/**
 * A dial forwarded to another gateway instance (lib/fleet/peer/) could not reach it: no
 * connection (refused, TLS, timeout), the link died before the dial was answered, or the peer is
 * draining. Nothing was dialed there; routing may try another owner. To a caller it is what it
 * would be on one instance: no agent (503).
 */
export class PeerUnavailableError extends NoAgentError {
  constructor(
    readonly peer: string,
    reason: string,
  ) {
    super(`peer instance ${peer} unavailable: ${reason}`);
  }
}

/**
 * The peer instance a dial was forwarded to has no agent of the caller's tenant (any more):
 * routing's view of the fleet is stale. It re-reads the owners and retries once.
 */
export class PeerNotHereError extends NoAgentError {
  constructor(
    readonly peer: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * A failure that is not one of ours: a bug, or a library throwing where we expected it not to.
 * Mapped like any other (500, INTERNAL), with the original as its cause.
 */
export class InternalError extends GatewayError {
  constructor(cause: unknown) {
    super("ERR_INTERNAL", cause instanceof Error ? cause.message : String(cause), { cause });
  }
}

/** What a catch site holds, as a typed failure: itself when it is one, else an InternalError. */
export function toGatewayError(err: unknown): GatewayError {
  return err instanceof GatewayError ? err : new InternalError(err);
}

/**
 * `kgw status`: the admin address did not answer, or what answered is not the status API. The
 * message names the address, so the operator knows which instance to look at.
 */
export class AdminUnreachableError extends GatewayError {
  constructor(
    readonly address: string,
    reason: string,
    options?: { cause?: unknown },
  ) {
    super("ERR_SERVER_CONNECT", `the admin address ${address} did not answer: ${reason}`, options);
  }
}
