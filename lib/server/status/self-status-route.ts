/**
 * `GET /v1/status` on the gateway port (8132): a tenant's own status, asked with its own caller
 * credential (a client certificate, or a caller token as `Authorization: Bearer`), so that a
 * cluster's owner can see where its agents are and why its dials failed without the operator.
 * The answer is the tenant's part of the fleet's status (any instance answers, as on the admin
 * port) and nothing else: no other tenant, no instance layout, no secret.
 *
 * The head was parsed by the CONNECT parser under its limits (--max-header-bytes,
 * --header-timeout; lib/transport/frontend-connection.ts). Refused: no credential or one that is
 * not a caller's (an agent token, a revoked or unknown one: 401, one message for all), a body
 * (400), more than MAX_SELF_STATUS_IN_FLIGHT answers under way (503 + Retry-After). Refusals are
 * logged within a budget (refusal-log.ts), never with a header's value.
 */
import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";
import { BadRequestError, GatewayError } from "../../errors.js";
import type { Logger } from "../../observability/logger.js";
import { refusalLog } from "../../observability/refusal-log.js";
import type { GetRequest } from "../../transport/http-connect-parser.js";
import { SELF_STATUS_ANSWER_TIMEOUT_MS, SELF_STATUS_LINGER_MS } from "../durations.js";
import type { CallerAuthenticator } from "../policy/caller-auth.js";
import { formatSelfStatusResponse, type SelfStatus, type SelfStatusOutcome } from "./self-status-response.js";

export const SELF_STATUS_PATH = "/v1/status";

/**
 * Answers under way at once on one instance. Each may ask every peer; a tenant polling in a loop
 * gets 503 + Retry-After past this instead of multiplying the fleet's peer calls.
 */
export const MAX_SELF_STATUS_IN_FLIGHT = 16;
/** Bytes read and dropped after the head (a GET has none); past this the peer is cut off. */
export const MAX_SELF_STATUS_DISCARDED_BYTES = 16 * 1024;

export type GetRoute = (socket: Socket, request: GetRequest, rest: Buffer) => void;

export interface SelfStatusDeps {
  authenticate: CallerAuthenticator;
  /** The tenant's status across the fleet. */
  statusOf(tenant: string): Promise<SelfStatus>;
  log: Logger;
}

/** True for `/v1/status` with or without a query (which is ignored). */
export function isSelfStatusPath(path: string): boolean {
  return path === SELF_STATUS_PATH || path.startsWith(`${SELF_STATUS_PATH}?`);
}

export function createSelfStatusRoute(deps: SelfStatusDeps): GetRoute {
  const log = deps.log.child({ component: "self-status" });
  const logRefusal = refusalLog(log);
  let inFlight = 0;

  return (socket, request, rest) => {
    let answered = false;
    let discarded = rest.length;
    let timer = setTimeout(() => answer("busy", { reason: "timeout" }), SELF_STATUS_ANSWER_TIMEOUT_MS);
    socket.on("data", (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > MAX_SELF_STATUS_DISCARDED_BYTES) socket.destroy();
    });
    socket.on("error", () => {}); // the peer may be gone; there is no one left to tell
    socket.once("close", () => clearTimeout(timer));

    function answer(outcome: SelfStatusOutcome, fields: Record<string, unknown>, status?: SelfStatus): void {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (outcome === "ok") log.debug({ tenant: status?.tenant.tenant }, "answered a tenant's status");
      else logRefusal({ outcome, ...fields }, "refused a tenant status request");
      if (socket.destroyed) return;
      socket.end(formatSelfStatusResponse(outcome, status));
      timer = setTimeout(() => socket.destroy(), SELF_STATUS_LINGER_MS);
    }

    if (!isSelfStatusPath(request.path)) {
      answer("not_found", { reason: "path" });
      return;
    }
    if (
      request.headers.has("transfer-encoding") ||
      (request.headers.get("content-length") ?? ["0"]).some((v) => v !== "0")
    ) {
      answer("bad_request", { reason: "body" });
      return;
    }
    let tenant: string;
    let credential: string;
    try {
      const caller = deps.authenticate({
        listener: "gateway",
        verifiedCertificate:
          socket instanceof TLSSocket && socket.authorized ? socket.getPeerCertificate() : undefined,
        authorization: request.headers.get("authorization") ?? [],
      });
      tenant = caller.tenant;
      credential = caller.principal;
    } catch (err) {
      const bad = err instanceof BadRequestError;
      answer(bad ? "bad_request" : "unauthenticated", {
        reason: err instanceof GatewayError ? err.code : "error",
        ...(typeof (err as { reason?: unknown }).reason === "string"
          ? { refusal: (err as { reason: string }).reason }
          : {}),
      });
      return;
    }
    if (inFlight >= MAX_SELF_STATUS_IN_FLIGHT) {
      answer("busy", { reason: "in-flight", tenant, credential });
      return;
    }
    inFlight++;
    deps.statusOf(tenant).then(
      (status) => {
        inFlight--;
        answer("ok", { tenant, credential }, status);
      },
      (err: unknown) => {
        inFlight--;
        log.error({ err: (err as Error).message, tenant, credential }, "tenant status failed");
        answer("error", { tenant, credential });
      },
    );
  };
}

/** The gateway port's GET routes: the tenant's status, and the install link when it is on. */
export function gatewayGetRoutes(selfStatus: GetRoute, install: GetRoute | undefined): GetRoute {
  return (socket, request, rest) =>
    isSelfStatusPath(request.path) || !install
      ? selfStatus(socket, request, rest)
      : install(socket, request, rest);
}
