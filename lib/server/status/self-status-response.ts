/**
 * The answers of a tenant's `GET /v1/status` on the gateway port, as bytes: socket-free, so
 * every status is tested without a socket. Each is one write with Content-Length, closes the
 * connection and must not be cached. Refusals carry the error code in X-Kgw-Error-Code and a
 * short body that says what to do; nothing in them depends on which tenants exist.
 */
import type { TenantDetail } from "./status-model.js";
import { STATUS_API_VERSION } from "./status-model.js";

/** What a tenant sees of the status model: its own tenant, nothing of the fleet's layout. */
export interface SelfStatus {
  readonly apiVersion: typeof STATUS_API_VERSION;
  readonly generatedAt: string;
  /** True when some instance did not answer: agents there are missing from this answer. */
  readonly partial: boolean;
  readonly tenant: TenantDetail;
}

export type SelfStatusOutcome = "ok" | "unauthenticated" | "bad_request" | "not_found" | "busy" | "error";

const STATUS: Readonly<Record<SelfStatusOutcome, readonly [number, string, string]>> = {
  ok: [200, "OK", ""],
  unauthenticated: [401, "Unauthorized", "ERR_UNAUTHENTICATED"],
  bad_request: [400, "Bad Request", "ERR_BAD_REQUEST"],
  not_found: [404, "Not Found", "ERR_NOT_FOUND"],
  // No code of ours says "busy" (the install route's 503 has none either): Retry-After says it.
  busy: [503, "Service Unavailable", ""],
  error: [500, "Internal Server Error", "ERR_INTERNAL"],
};

const MESSAGE: Readonly<Record<Exclude<SelfStatusOutcome, "ok">, string>> = {
  unauthenticated:
    "a tenant's caller credential is required: a client certificate, or a caller token as Authorization: Bearer",
  bad_request: "bad request: GET /v1/status takes no body and one Authorization header at most",
  not_found: "not found",
  busy: "the gateway is busy; try again shortly",
  error: "internal error",
};

export function selfStatusOf(tenant: TenantDetail, partial: boolean, now: number): SelfStatus {
  return { apiVersion: STATUS_API_VERSION, generatedAt: new Date(now).toISOString(), partial, tenant };
}

export function formatSelfStatusResponse(outcome: SelfStatusOutcome, status?: SelfStatus): Buffer {
  const [code, reason, errorCode] = STATUS[outcome];
  const payload =
    outcome === "ok"
      ? status
      : { error: { code: errorCode || null, message: MESSAGE[outcome as Exclude<SelfStatusOutcome, "ok">] } };
  const body = Buffer.from(`${JSON.stringify(payload, null, 2)}\n`, "utf8");
  const headers = [
    `HTTP/1.1 ${code} ${reason}`,
    "Content-Type: application/json; charset=utf-8",
    `Content-Length: ${body.length}`,
    "Cache-Control: no-store",
    "X-Content-Type-Options: nosniff",
    ...(errorCode ? [`X-Kgw-Error-Code: ${errorCode}`] : []),
    ...(outcome === "unauthenticated" ? ['WWW-Authenticate: Bearer realm="kgw"'] : []),
    ...(outcome === "busy" ? ["Retry-After: 1"] : []),
    "Connection: close",
  ];
  return Buffer.concat([Buffer.from(`${headers.join("\r\n")}\r\n\r\n`, "latin1"), body]);
}
