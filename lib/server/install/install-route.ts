/**
 * `GET /v1/install/<install-token>.yaml` on the gateway port: the one-line agent install,
 * `kubectl apply -f https://<gateway>:8132/v1/install/<token>.yaml`. The head was parsed by the
 * CONNECT parser under its limits (--max-header-bytes, --header-timeout; see
 * lib/transport/frontend-connection.ts); this answers it:
 *
 * - 200 `application/yaml`: the tenant's agent manifest with a freshly minted agent token. The
 *   install token is checked, a single-use one marked used, and the agent token listed, in one
 *   conditional write (redeemInstallToken): of two fetches racing, exactly one gets a manifest.
 * - 404 for an unknown, malformed or revoked token (or any other path); 410 for an expired or
 *   spent one. Every well-formed token takes the same steps (one read of its tenant's record, a
 *   hash, a constant-time compare) whether its tenant exists or not, and the bodies never say.
 * - 400 for a request with a body; 429 when too many fetches from one source are in flight, 503
 *   when too many are in all or the store fails (both with Retry-After).
 *
 * Every answer is one write with Content-Length, `Cache-Control: no-store` and
 * `Connection: close`. The log names the token id, never the secret; refusals are logged within
 * a budget (refusal-log.ts).
 */
import type { Socket } from "node:net";
import { GatewayError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { refusalLog } from "../../observability/refusal-log.js";
import { InstallTokenRefusedError } from "../../tenancy/install/errors.js";
import { redeemInstallToken } from "../../tenancy/install/store-operations.js";
import type { TenantStore } from "../../tenancy/store.js";
import { sourceKey } from "../../transport/handshake-gate.js";
import type { GetRequest } from "../../transport/http-connect-parser.js";
import { INSTALL_ANSWER_TIMEOUT_MS, INSTALL_LINGER_MS } from "../durations.js";
import { formatInstallResponse, type InstallOutcome, outcomeForRefusal } from "./install-response.js";

/** The route's path; the token's own grammar is checked by redeemInstallToken. */
export const INSTALL_PATH = /^\/v1\/install\/([A-Za-z0-9_-]{1,200})\.yaml$/;

/**
 * Fetches being answered at once on one instance. Each costs a store read and a write; kubectl
 * fetches once per install, so more than this at a time is a flood, answered 503 + Retry-After
 * without touching the store.
 */
export const MAX_INSTALL_IN_FLIGHT = 16;
/**
 * Fetches from one source (sourceKey: an IPv4 address, an IPv6 /64) answered at once. kubectl
 * fetches once per install, and a few clusters installed at once behind one NAT stay under this;
 * a source past it is flooding, and gets 429 + Retry-After, so that one source can hold at most
 * a quarter of MAX_INSTALL_IN_FLIGHT and never crowd out the others. The table of sources needs
 * no bound of its own: a source is in it only while it has a fetch in flight, so it never holds
 * more than MAX_INSTALL_IN_FLIGHT entries.
 */
export const MAX_INSTALL_IN_FLIGHT_PER_SOURCE = 4;
/**
 * Bytes read and dropped after the head. A GET has no body, but closing with unread bytes makes
 * the kernel answer with a reset that can destroy the response in flight; past this, the peer
 * is sending something else than a GET and is cut off.
 */
export const MAX_DISCARDED_BYTES = 16 * 1024;

export type InstallRoute = (socket: Socket, request: GetRequest, rest: Buffer) => void;

export interface InstallRouteDeps {
  store: TenantStore;
  /** The manifest for `tenantId` holding `agentToken` (renderAgentManifest with the server's options). */
  render(tenantId: string, agentToken: string): string;
  log: Logger;
  metrics: ServerMetrics;
  now?: () => Date;
}

export function createInstallRoute(deps: InstallRouteDeps): InstallRoute {
  const now = deps.now ?? (() => new Date());
  const log = deps.log.child({ component: "install" });
  // Bogus links cost a line each: within a budget, like every refusal of unauthenticated input.
  const logRefusal = refusalLog(log);
  let inFlight = 0;
  const inFlightBySource = new Map<string, number>();

  return (socket, request, rest) => {
    let answered = false;
    let discarded = rest.length;
    let timer = setTimeout(() => answer("busy", { reason: "timeout" }), INSTALL_ANSWER_TIMEOUT_MS);
    const onData = (chunk: Buffer) => {
      discarded += chunk.length;
      if (discarded > MAX_DISCARDED_BYTES) socket.destroy();
    };
    socket.on("data", onData);
    socket.on("error", () => {}); // the peer may be gone; there is no one left to tell
    socket.once("close", () => clearTimeout(timer));

    function answer(outcome: InstallOutcome, fields: Record<string, unknown> = {}, manifest?: string): void {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      deps.metrics.installRequests.inc({ outcome });
      if (outcome === "ok") log.info({ outcome, ...fields }, "served an agent manifest");
      else logRefusal({ outcome, ...fields }, "refused an install fetch");
      if (socket.destroyed) return;
      socket.end(formatInstallResponse(outcome, manifest));
      timer = setTimeout(() => socket.destroy(), INSTALL_LINGER_MS);
    }

    if (
      request.headers.has("transfer-encoding") ||
      (request.headers.get("content-length") ?? ["0"]).some((v) => v !== "0")
    ) {
      answer("bad_request", { reason: "body" });
      return;
    }
    const match = INSTALL_PATH.exec(request.path);
    if (!match) {
      // Not a route of ours; the path is not logged (it may hold something secret of someone's).
      answer("not_found", { reason: "path" });
      return;
    }
    const source = sourceKey(socket.remoteAddress ?? "unknown");
    const fromSource = inFlightBySource.get(source) ?? 0;
    if (fromSource >= MAX_INSTALL_IN_FLIGHT_PER_SOURCE) {
      answer("throttled", { reason: "in-flight-per-source", source });
      return;
    }
    if (inFlight >= MAX_INSTALL_IN_FLIGHT) {
      answer("busy", { reason: "in-flight", source });
      return;
    }
    inFlight++;
    inFlightBySource.set(source, fromSource + 1);
    redeemInstallToken(deps.store, match[1]!, now)
      .then((redeemed) => {
        const fields = {
          tenant: redeemed.tenantId,
          installTokenId: redeemed.installTokenId,
          agentTokenId: redeemed.agentTokenId,
        };
        let manifest: string;
        try {
          manifest = deps.render(redeemed.tenantId, redeemed.agentToken);
        } catch (err) {
          // The options were checked at start, so this is a bug; the token listed is unused.
          answer("error", { ...fields, err: (err as Error).message });
          return;
        }
        if (socket.destroyed) {
          // Spent with nobody to receive it: say so, with what to revoke and what to reissue.
          log.warn(
            fields,
            "the client left before its manifest was sent; its agent token is listed but unused",
          );
        }
        answer("ok", fields, manifest);
      })
      .catch((err: unknown) => {
        if (err instanceof InstallTokenRefusedError) {
          answer(outcomeForRefusal(err.reason), { reason: err.reason, installTokenId: err.tokenId });
        } else if (err instanceof GatewayError) {
          // Store trouble, conflicts exhausted, or the tenant's agent-token list full.
          answer("busy", { code: err.code, err: err.message });
        } else {
          answer("error", { err: (err as Error).message });
        }
      })
      .finally(() => {
        inFlight--;
        const left = (inFlightBySource.get(source) ?? 1) - 1;
        if (left > 0) inFlightBySource.set(source, left);
        else inFlightBySource.delete(source);
      });
  };
}
