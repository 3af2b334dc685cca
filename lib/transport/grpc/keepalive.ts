/**
 * Keepalive on one of our HTTP/2 sessions, either end (the gRPC server, server.ts; the fleet's
 * peer links, lib/fleet/peer/peer-link.ts): a PING every `intervalMs`; no answer within
 * `timeoutMs` calls `onTimeout`, which closes the connection by its socket (a stuck session
 * waits for a write that never finishes: ../http2-peer-watch.ts says why not
 * `session.destroy()` alone).
 */
import type { Http2Session } from "node:http2";

export interface KeepaliveOptions {
  intervalMs: number;
  timeoutMs: number;
  /** No answer in time: close the connection. */
  onTimeout(): void;
  /** Told of each PING sent (the session's peer watch, PeerActivity.pingSent), if anyone is. */
  pingSent?: () => ((answered: boolean) => void) | undefined;
}

/** Starts the PINGs; they stop when the session closes. */
export function keepalive(session: Http2Session, opts: KeepaliveOptions): void {
  const { intervalMs, timeoutMs, onTimeout } = opts;
  const timer = setInterval(() => {
    // After GOAWAY (drain) Node fails every PING at once; the drain has its own time limit.
    if (session.closed || session.destroyed) return;
    const deadline = setTimeout(onTimeout, timeoutMs).unref();
    const watched = opts.pingSent?.();
    try {
      // Called with an error when the session closes first: the deadline goes either way.
      session.ping((err) => {
        clearTimeout(deadline);
        watched?.(!err);
      });
    } catch {
      clearTimeout(deadline); // closing already
      watched?.(false);
    }
  }, intervalMs).unref();
  session.once("close", () => clearInterval(timer));
}
