/**
 * The peer link's fixed durations and sizes, each with its reason. Peers are instances of one
 * fleet in one region: round trips are well under a millisecond, and a peer that does not answer
 * within a few seconds is gone, not slow.
 */
import { HTTP2_STREAM_WINDOW_BYTES } from "../../transport/grpc/windows.js";

/**
 * TCP connect plus TLS handshake to a peer. Longer than a healthy peer ever needs (a few ms), so
 * that a busy one is not written off; short enough that dials queued behind a dead address fail
 * over quickly.
 */
export const PEER_CONNECT_TIMEOUT_MS = 3_000;

/**
 * How long a peer whose link failed (connect, TLS, GOAWAY, a dead link) is first avoided:
 * `isHealthy` says false and dials fail at once with PeerUnavailableError, so routing picks
 * another owner instead of every dial paying the connect timeout. Short, since most failures are
 * a restart or a blip; after it, the next dial tries again.
 */
export const PEER_FAILURE_BACKOFF_BASE_MS = 500;

/**
 * Each further failure in a row doubles the avoidance, up to this: a peer that stays down costs
 * each instance one connect attempt every few seconds (its lease expiring drops it from routing).
 */
export const PEER_FAILURE_BACKOFF_MAX_MS = 5_000;

/**
 * Each backoff is drawn from [1 - this, 1] of its ceiling, so the instances of a fleet do not
 * retry a recovering peer in lockstep.
 */
export const PEER_FAILURE_BACKOFF_JITTER = 0.5;

/**
 * Keepalive of a peer connection: a PING this often, and the connection is closed (its tunnels
 * broken, the peer marked failing) when one goes unanswered this long. A peer killed without a
 * FIN or RST (its host gone) is noticed within the sum; one that resets the connection at once.
 */
export const PEER_KEEPALIVE_MS = 5_000;
export const PEER_KEEPALIVE_TIMEOUT_MS = 5_000;

/**
 * Dead-peer watch while writing (lib/transport/http2-peer-watch.ts): a link that wrote and heard
 * nothing for half a second is checked, and one whose PING goes unanswered this long is closed.
 */
export const PEER_WATCH_ANSWER_MS = PEER_KEEPALIVE_TIMEOUT_MS;

/**
 * How long a forwarded dial waits for the owner's DIAL_RSP beyond the owner's own dial timeout
 * (the owner answers a timeout itself, with its reason; this only catches an owner that answers
 * nothing at all).
 */
export const PEER_DIAL_TIMEOUT_MARGIN_MS = 2_000;

/**
 * How long a forwarded dial waits for the owner's answer, given --backend-dial-timeout (which
 * every instance of a fleet shares, and the owner applies): that plus the margin; 0 (no
 * timeout) stays 0, as on one instance.
 */
export function peerDialTimeoutMs(backendDialTimeoutMs: number): number {
  return backendDialTimeoutMs > 0 ? backendDialTimeoutMs + PEER_DIAL_TIMEOUT_MARGIN_MS : 0;
}

/**
 * Per-stream HTTP/2 window of a peer link, each direction: one tunnel per stream, so this is
 * what one stalled reader can hold in memory at the receiving instance, and the most a tunnel
 * has in flight per round trip (16 MiB: far beyond in-region round trips, the same as every
 * other HTTP/2 stream of the gateway).
 */
export const PEER_STREAM_WINDOW_BYTES = HTTP2_STREAM_WINDOW_BYTES;

/**
 * Connection window of the client end. Node returns connection-level credit as soon as a frame
 * arrives (a paused stream holds only its own stream window), so a stalled tunnel never starves
 * the others; this only bounds the whole link's bytes in flight per round trip.
 */
export const PEER_CONNECTION_WINDOW_BYTES = 4 * PEER_STREAM_WINDOW_BYTES;

/**
 * Bytes queued on one tunnel's stream before the sender is told to back off: a quarter of a
 * credit window, the same as a frontend call's (lib/transport/grpc/call-stream.ts).
 */
export const PEER_STREAM_HIGH_WATER_BYTES = 512 * 1024;

/** Largest gRPC message taken from a peer: the same 16 MiB as from any other gRPC peer. */
export const PEER_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
