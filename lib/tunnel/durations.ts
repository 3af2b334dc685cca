/**
 * Named durations of the tunnel core, shared by both sides (the agent's own are in
 * lib/agent/durations.ts, the server's and its fleet's in lib/server/durations.ts). Each has a
 * reason; flags override the ones operators tune, and their defaults refer to these (lib/config/
 * sits above this layer, so the default lives here, once).
 */

/**
 * How long a connection closed by the caller stays known after CLOSE_REQ, waiting for the
 * agent's CLOSE_RSP. Packets for it that are already in flight are dropped quietly instead of
 * provoking another CLOSE_REQ each. Upstream's client waits the same 10s for CLOSE_RSP.
 */
export const CLOSE_ACK_TIMEOUT_MS = 10_000;

/**
 * Default time a dial may wait for DIAL_RSP (--backend-dial-timeout; a peer hop waits for the
 * owner's answer that long plus a margin); upstream's default is none, which hangs callers.
 */
export const DEFAULT_DIAL_TIMEOUT_MS = 10_000;
