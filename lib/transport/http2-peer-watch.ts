/**
 * Notices HTTP/2 peers that died while we were writing to them, and closes their connections.
 *
 * Node's native HTTP/2 session has a failure mode (nodejs/node#61304, #50884) that no event
 * reports: when a write to the socket fails with ECONNRESET, the session is neither destroyed
 * nor reading any more, so neither EOF nor an error ever arrives, and every stream on it stays
 * open. `session.destroy()` does not free it either (it waits for the stuck write); destroying
 * the socket does. On this machine 7–10 of 10 sessions that were sending when their peer was
 * SIGKILLed ended up that way (test/integration/http2-peer-watch.test.ts). For the gateway that
 * means tunnels of a vanished kube-apiserver or upstream agent that never close.
 *
 * The watch looks only at sessions that wrote since their peer last said anything (as far as
 * counters sampled every `tickMs` tell) and then heard nothing for `stallMs`. Such a session is
 * asked two things: whether its TCP socket still has a peer (a reset socket reports ENOTCONN:
 * certain, so it is closed at once) and, when that cannot be told, a PING, which any live HTTP/2
 * peer answers however busy its streams are; no answer within `answerMs` closes it. Sessions that are idle cost one counter comparison per tick; one
 * whose request and answer fall into the same tick gets a PING after it (counters are sampled).
 */

import type { Http2Session } from "node:http2";
import { constants as osConstants } from "node:os";
import type { Duplex } from "node:stream";

export interface Http2PeerWatchOptions {
  /** How often sessions are looked at. */
  tickMs: number;
  /** Silence after our own writes before the peer is asked whether it is still there. */
  stallMs: number;
  /** How long a PING may go unanswered. */
  answerMs: number;
  /** True when the socket certainly has no peer any more. */
  disconnected?: (socket: Duplex) => boolean;
  /** Told of every connection closed by the watch, with the reason. */
  onClosed?: (reason: PeerGoneReason) => void;
}

export type PeerGoneReason = "connection reset" | "no PING answer";

interface Watched {
  session: Http2Session;
  socket: Duplex;
  read: number;
  written: number;
  readAt: number;
  wroteAt: number;
  pingSentAt: number | null;
  /** Bytes written when the peer last answered a PING: nothing new to ask about until it grows. */
  answeredWritten: number;
}

interface Counted {
  bytesRead?: number;
  bytesWritten?: number;
}

/**
 * Whether the kernel says the TCP socket under `socket` has lost its peer: getpeername() fails
 * with ENOTCONN once a reset arrived. Reaches the libuv handle Node keeps on `_handle` (the TCP
 * socket a TLS socket was made from is its `_parent`); when that shape is not there it says
 * false and the PING decides.
 */
export function tcpPeerGone(socket: Duplex): boolean {
  type Handle = { getpeername?: (out: object) => number };
  const s = socket as unknown as { _parent?: { _handle?: Handle }; _handle?: Handle };
  const handle = s._parent?._handle ?? s._handle;
  if (typeof handle?.getpeername !== "function") return false;
  return handle.getpeername({}) === -osConstants.errno.ENOTCONN;
}

export class Http2PeerWatch {
  private readonly watched = new Map<Http2Session, Watched>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: Http2PeerWatchOptions) {}

  /** Watches `session` until it closes. `socket` is the transport it was made on. */
  watch(session: Http2Session, socket: Duplex): void {
    if (session.destroyed) return;
    const now = Date.now();
    const c = socket as Counted;
    this.watched.set(session, {
      session,
      socket,
      read: c.bytesRead ?? 0,
      written: c.bytesWritten ?? 0,
      readAt: now,
      wroteAt: now,
      pingSentAt: null,
      answeredWritten: -1,
    });
    session.once("close", () => this.forget(session));
    this.timer ??= setInterval(() => this.tick(), this.opts.tickMs).unref();
  }

  get size(): number {
    return this.watched.size;
  }

  /** Stops watching everything, new sessions included (the sessions themselves are left alone). */
  close(): void {
    this.watched.clear();
    this.stopTimer();
  }

  private forget(session: Http2Session): void {
    this.watched.delete(session);
    if (this.watched.size === 0) this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private tick(): void {
    const now = Date.now();
    for (const w of this.watched.values()) {
      const c = w.socket as Counted;
      const read = c.bytesRead ?? 0;
      const written = c.bytesWritten ?? 0;
      if (read !== w.read) {
        w.read = read;
        w.readAt = now;
        // A stuck session never reads: anything read proves the peer alive, so a PING queued
        // behind a full send buffer on a slow link gets more time while the peer keeps talking.
        if (w.pingSentAt !== null) w.pingSentAt = now;
      }
      if (written !== w.written) {
        w.written = written;
        w.wroteAt = now;
      }
      if (w.pingSentAt !== null) {
        if (now - w.pingSentAt >= this.opts.answerMs) this.close1(w, "no PING answer");
        continue;
      }
      // Counters are sampled, so a write and a read in one tick look simultaneous: a peer that
      // died just after our last write looks like that, hence >= and not >.
      const askable = w.wroteAt >= w.readAt && written !== w.answeredWritten;
      if (!askable || now - w.readAt < this.opts.stallMs) continue;
      if (this.opts.disconnected?.(w.socket)) {
        this.close1(w, "connection reset");
        continue;
      }
      this.ping(w, now);
    }
  }

  private ping(w: Watched, now: number): void {
    try {
      // False when too many PINGs are outstanding: the deadline applies all the same.
      w.session.ping((err) => {
        if (err) return;
        w.pingSentAt = null;
        w.answeredWritten = (w.socket as Counted).bytesWritten ?? 0;
      });
      w.pingSentAt = now;
    } catch {
      // Closing or destroyed: its "close" removes it, unless it is stuck, which the deadline
      // then catches.
      w.pingSentAt = now;
    }
  }

  private close1(w: Watched, reason: PeerGoneReason): void {
    this.forget(w.session);
    // Not session.destroy(): on a stuck session it waits for the write that never finishes.
    w.socket.destroy();
    this.opts.onClosed?.(reason);
  }
}
