/**
 * What every failure carries: a fixed code (ErrorCode) on a GatewayError, and the one pure
 * mapping from a code to a wire status, `httpStatusFor` and `grpcStatusFor`, so that HTTP
 * CONNECT and gRPC stay consistent. It imports nothing; the failures themselves, one class each,
 * are in errors.ts, which re-exports all of this (import from there).
 */

export type ErrorCode =
  | "ERR_CONFIG"
  | "ERR_BAD_REQUEST"
  | "ERR_METHOD_NOT_ALLOWED"
  | "ERR_HEADERS_TOO_LARGE"
  | "ERR_HEADERS_TIMEOUT"
  | "ERR_UNAUTHENTICATED"
  | "ERR_PROXY_AUTH_REQUIRED"
  | "ERR_FORBIDDEN"
  | "ERR_QUOTA"
  | "ERR_NO_AGENT"
  | "ERR_AGENT_GONE"
  | "ERR_DIAL_FAILED"
  | "ERR_DIAL_TIMEOUT"
  | "ERR_DIAL_CANCELLED"
  | "ERR_DESTINATION_NOT_ALLOWED"
  | "ERR_CONNECTION_BROKEN"
  | "ERR_UNKNOWN_CONNECTION"
  | "ERR_PROTOCOL"
  | "ERR_UNSUPPORTED"
  | "ERR_MESSAGE_TOO_LARGE"
  | "ERR_DEADLINE_EXCEEDED"
  | "ERR_SHUTTING_DOWN"
  | "ERR_DRAINED"
  | "ERR_SERVER_CONNECT"
  // The tenant store (lib/tenancy/errors.ts has the classes).
  | "ERR_NOT_FOUND"
  | "ERR_ALREADY_EXISTS"
  | "ERR_ALREADY_REVOKED"
  | "ERR_CONFLICT"
  | "ERR_STORE_CORRUPT"
  | "ERR_STORE_UNAVAILABLE"
  // A failure that is not one of ours (a bug): see toGatewayError in errors.ts.
  | "ERR_INTERNAL";

export class GatewayError extends Error {
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

const HTTP_STATUS: Record<ErrorCode, number> = {
  ERR_CONFIG: 500,
  ERR_BAD_REQUEST: 400,
  ERR_METHOD_NOT_ALLOWED: 405,
  ERR_HEADERS_TOO_LARGE: 431,
  ERR_HEADERS_TIMEOUT: 408,
  ERR_UNAUTHENTICATED: 401,
  ERR_PROXY_AUTH_REQUIRED: 407,
  ERR_FORBIDDEN: 403,
  ERR_QUOTA: 429,
  // Upstream v0.36 answers 500 when no agent is connected; 503 says what it is (temporarily
  // unavailable) and is what load balancers and clients retry on. See docs/COMPATIBILITY.md.
  ERR_NO_AGENT: 503,
  ERR_AGENT_GONE: 503,
  ERR_DIAL_FAILED: 502,
  ERR_DIAL_TIMEOUT: 504,
  ERR_DIAL_CANCELLED: 502,
  ERR_DESTINATION_NOT_ALLOWED: 403,
  ERR_CONNECTION_BROKEN: 502,
  ERR_UNKNOWN_CONNECTION: 400,
  ERR_PROTOCOL: 400,
  ERR_UNSUPPORTED: 501,
  ERR_MESSAGE_TOO_LARGE: 413,
  ERR_DEADLINE_EXCEEDED: 504,
  ERR_SHUTTING_DOWN: 503,
  ERR_DRAINED: 503,
  ERR_SERVER_CONNECT: 502,
  ERR_NOT_FOUND: 404,
  ERR_ALREADY_EXISTS: 409,
  ERR_ALREADY_REVOKED: 409,
  ERR_CONFLICT: 409,
  ERR_STORE_CORRUPT: 500,
  ERR_STORE_UNAVAILABLE: 503,
  ERR_INTERNAL: 500,
};

/** HTTP status for a CONNECT request that failed with `err`. Unknown errors are 500. */
export function httpStatusFor(err: unknown): number {
  return err instanceof GatewayError ? HTTP_STATUS[err.code] : 500;
}

/** gRPC status codes (numeric, as @grpc/grpc-js `status`) for a stream that fails with `err`. */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  DATA_LOSS: 15,
} as const;

const GRPC_CODE_NAMES = new Map<number, string>(Object.entries(GrpcCode).map(([name, code]) => [code, name]));

/** The name of a gRPC status code ("UNAUTHENTICATED"), as @grpc/grpc-js `status[code]` gives it. */
export function grpcCodeName(code: number): string {
  return GRPC_CODE_NAMES.get(code) ?? String(code);
}

const GRPC_STATUS: Record<ErrorCode, number> = {
  ERR_CONFIG: GrpcCode.INTERNAL,
  ERR_BAD_REQUEST: GrpcCode.INVALID_ARGUMENT,
  ERR_METHOD_NOT_ALLOWED: GrpcCode.INVALID_ARGUMENT,
  ERR_HEADERS_TOO_LARGE: GrpcCode.INVALID_ARGUMENT,
  ERR_HEADERS_TIMEOUT: GrpcCode.DEADLINE_EXCEEDED,
  ERR_UNAUTHENTICATED: GrpcCode.UNAUTHENTICATED,
  ERR_PROXY_AUTH_REQUIRED: GrpcCode.UNAUTHENTICATED,
  ERR_FORBIDDEN: GrpcCode.PERMISSION_DENIED,
  ERR_QUOTA: GrpcCode.RESOURCE_EXHAUSTED,
  ERR_NO_AGENT: GrpcCode.UNAVAILABLE,
  ERR_AGENT_GONE: GrpcCode.UNAVAILABLE,
  ERR_DIAL_FAILED: GrpcCode.UNAVAILABLE,
  ERR_DIAL_TIMEOUT: GrpcCode.DEADLINE_EXCEEDED,
  ERR_DIAL_CANCELLED: GrpcCode.UNAVAILABLE,
  ERR_DESTINATION_NOT_ALLOWED: GrpcCode.PERMISSION_DENIED,
  ERR_CONNECTION_BROKEN: GrpcCode.UNAVAILABLE,
  ERR_UNKNOWN_CONNECTION: GrpcCode.INVALID_ARGUMENT,
  ERR_PROTOCOL: GrpcCode.INVALID_ARGUMENT,
  ERR_UNSUPPORTED: GrpcCode.UNIMPLEMENTED,
  ERR_MESSAGE_TOO_LARGE: GrpcCode.RESOURCE_EXHAUSTED,
  ERR_DEADLINE_EXCEEDED: GrpcCode.DEADLINE_EXCEEDED,
  ERR_SHUTTING_DOWN: GrpcCode.UNAVAILABLE,
  // The tunnel's end of the path was stopped on purpose; the caller reconnects, as for UNAVAILABLE.
  ERR_DRAINED: GrpcCode.UNAVAILABLE,
  ERR_SERVER_CONNECT: GrpcCode.UNAVAILABLE,
  ERR_NOT_FOUND: GrpcCode.NOT_FOUND,
  ERR_ALREADY_EXISTS: GrpcCode.ALREADY_EXISTS,
  // The credential is in no state to be revoked: it is revoked already.
  ERR_ALREADY_REVOKED: GrpcCode.FAILED_PRECONDITION,
  // ABORTED is gRPC's code for a failed optimistic-concurrency check: retry the read-modify-write.
  ERR_CONFLICT: GrpcCode.ABORTED,
  ERR_STORE_CORRUPT: GrpcCode.DATA_LOSS,
  ERR_STORE_UNAVAILABLE: GrpcCode.UNAVAILABLE,
  ERR_INTERNAL: GrpcCode.INTERNAL,
};

/** gRPC status code for a stream that fails with `err`. Unknown errors are INTERNAL. */
export function grpcStatusFor(err: unknown): number {
  return err instanceof GatewayError ? GRPC_STATUS[err.code] : GrpcCode.INTERNAL;
}
