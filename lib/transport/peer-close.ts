/**
 * Errors that only say the peer has gone, or is going, as it is entitled to: nothing for an
 * operator to act on, so they are logged as a normal close, without a stack.
 *
 * - EPIPE / ECONNRESET: we wrote after the peer closed or reset its end.
 * - nghttp2's NGHTTP2_ERR_PROTO on an HTTP/2 session: Go's HTTP/2 client (grpc-go, so the
 *   konnectivity-client in kube-apiserver) ends a connection with a GOAWAY whose last-stream-ID
 *   is one of its own streams (golang/go#80759), which nghttp2 rejects as a protocol error and
 *   answers by ending the session. Node reports no other detail, so a peer that really breaks
 *   the framing is reported the same way; either way the session was over, its calls end as
 *   closed by the caller, and only that connection is affected.
 */

/** nghttp2's NGHTTP2_ERR_PROTO (not among Node's http2.constants). */
const NGHTTP2_ERR_PROTO = -505;

export type PeerCloseKind = "peer closed" | "peer reset" | "peer ended HTTP/2 with an invalid frame";

/** How the peer left, when `err` says no more than that; null for a real error. */
export function peerCloseKind(err: unknown): PeerCloseKind | null {
  const e = err as (NodeJS.ErrnoException & { errno?: number }) | null;
  if (!e || typeof e !== "object") return null;
  if (e.code === "EPIPE") return "peer closed";
  if (e.code === "ECONNRESET") return "peer reset";
  if (e.code === "ERR_HTTP2_ERROR" && e.errno === NGHTTP2_ERR_PROTO)
    return "peer ended HTTP/2 with an invalid frame";
  return null;
}
