/**
 * The install route's answers, as bytes: socket-free, so every status is tested without a
 * socket. Every answer is complete in one write (Content-Length, no chunking), closes the
 * connection and must not be cached: the 200 holds an agent token, and a cached 404 or 410
 * would outlive the state it described.
 */
import type { InstallRefusalReason } from "../../tenancy/install/errors.js";

/** What a fetch came to: the `outcome` label of kgw_server_install_requests_total. */
export type InstallOutcome = "ok" | "not_found" | "gone" | "bad_request" | "throttled" | "busy" | "error";

const STATUS: Readonly<Record<InstallOutcome, readonly [number, string]>> = {
  ok: [200, "OK"],
  not_found: [404, "Not Found"],
  gone: [410, "Gone"],
  bad_request: [400, "Bad Request"],
  throttled: [429, "Too Many Requests"],
  busy: [503, "Service Unavailable"],
  error: [500, "Internal Server Error"],
};

/**
 * Short bodies that say what to do, never why in detail: a 404 reads the same for a token that
 * never existed, a tenant that does not, and a revoked link.
 */
const BODY: Readonly<Record<Exclude<InstallOutcome, "ok">, string>> = {
  not_found: "not found\n",
  gone: "this install link has expired or was already used; ask for a new one\n",
  bad_request: "bad request\n",
  throttled: "too many fetches from your address at once; try again shortly\n",
  busy: "the gateway is busy; try again shortly\n",
  error: "internal error\n",
};

/** 404 for what might never have existed; 410 for a link that worked once or could have. */
export function outcomeForRefusal(reason: InstallRefusalReason): "not_found" | "gone" {
  switch (reason) {
    case "malformed":
    case "unknown":
    case "revoked":
      return "not_found";
    case "expired":
    case "used":
      return "gone";
  }
}

export function formatInstallResponse(outcome: InstallOutcome, manifest?: string): Buffer {
  const [status, reason] = STATUS[outcome];
  const body = Buffer.from(outcome === "ok" ? (manifest ?? "") : BODY[outcome], "utf8");
  const headers = [
    `HTTP/1.1 ${status} ${reason}`,
    `Content-Type: ${outcome === "ok" ? "application/yaml" : "text/plain"}; charset=utf-8`,
    `Content-Length: ${body.length}`,
    "Cache-Control: no-store",
    "X-Content-Type-Options: nosniff",
    ...(outcome === "busy" || outcome === "throttled" ? ["Retry-After: 1"] : []),
    "Connection: close",
  ];
  return Buffer.concat([Buffer.from(`${headers.join("\r\n")}\r\n\r\n`, "latin1"), body]);
}
