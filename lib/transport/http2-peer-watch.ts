/**
 * Notices HTTP/2 peers that died while we were writing to them, and closes their connections.
 *
 * Node's native HTTP/2 session has a failure mode (nodejs/node#61304, #50884) that no event
 * reports: when a write to the socket fails with ECONNRESET, the session is neither destroyed
 * nor reading any more, so neither EOF nor an error ever arrives, and every stream on it stays
 * open. `session.destroy()` does not free it either (it waits for the stuck write); destroying
 * the socket does. On this machine, on Node.js 20, 7–10 of 10 sessions that were sending when
 * their peer was SIGKILLed ended up that way (test/integration/http2-peer-watch.test.ts); on
 * Node.js 24.22.3 the same test sees Node close every one itself. For the gateway a stuck session
 * means tunnels of a vanished kube-apiserver or upstream agent that never close.
 *
 * The watch looks only at sessions that wrote since their peer last said anything (as far as
 * counters sampled every `tickMs` tell) and then heard nothing for `stallMs`. Such a session is
 * asked two things: whether its TCP socket still has a peer (a reset socket reports ENOTCONN:
 * certain, so it is closed at once) and, when that cannot be told, a PING, which any live HTTP/2
 * peer answers however busy its streams are; no answer within `answerMs` closes it. One whose
 * request and answer fall into the same tick gets a PING after it (counters are sampled).
 *
 * Idle sessions cost nothing. A session whose owner reports its activity (`watch(…, {
 * activityReported: true })`, as our gRPC server does for every write and read it makes) is looked
 * at only while something is outstanding: from a report until it has been quiet for a tick with
 * nothing asked, nothing unanswered and nothing left to send on any stream; a PING of the owner's
 * own (the agent liveness probe) only if it goes unanswered for `stallMs`, its answer counting as
 * one to ours. Only those sessions are on the tick, and the tick runs only while there are any:
 * 10,000 idle agents used to cost a fifth of a core in this sweep alone (docs/PERFORMANCE.md,
 * `scale`). What the owner cannot see is reported by Node's own events: a new stream (we answer
 * its headers), a PING or SETTINGS from the peer (Node acknowledges them by itself). Sessions
 * whose owner reports nothing (peer links) are looked at on every tick, as before.
 */

import type { Http2Session, Http2Stream } from "node:http2";
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

/** What the owner of a session whose activity is reported tells the watch. */
export interface PeerActivity {
  /** We wrote on the session, or read from it (Node may write an answer by itself). */
  active(): void;
  /**
   * We sent a PING of our own; call what it returns with true when the peer answered it. The
   * session is looked at if no answer comes within `stallMs`; an answer counts as one to the
   * watch's own PING.
   */
  pingSent(): (answered: boolean) => void;
}

interface Watched {
  session: Http2Session;
  socket: Duplex;
  /** Activity is reported (PeerActivity): the session is on the tick only while armed. */
  reported: boolean;
  armed: boolean;
  /** Open streams of a reported session: data still to be sent keeps it armed. */
  streams: Set<Http2Stream> | null;
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

const IGNORED: PeerActivity = { active: () => {}, pingSent: () => () => {} };

export class Http2PeerWatch {
  private readonly watched = new Map<Http2Session, Watched>();
  /** The sessions the tick looks at: every unreported one, and reported ones while armed. */
  private readonly armed = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: Http2PeerWatchOptions) {}

  /**
   * Watches `session` until it closes. `socket` is the transport it was made on. With
   * `activityReported`, the owner reports through what this returns (see PeerActivity).
   */
  watch(session: Http2Session, socket: Duplex, opts: { activityReported?: boolean } = {}): PeerActivity {
    if (session.destroyed) return IGNORED;
    const now = Date.now();
    const c = socket as Counted;
    const reported = opts.activityReported === true;
    const w: Watched = {
      session,
      socket,
      reported,
      armed: false,
      streams: reported ? new Set() : null,
      read: c.bytesRead ?? 0,
      written: c.bytesWritten ?? 0,
      readAt: now,
      wroteAt: now,
      pingSentAt: null,
      answeredWritten: -1,
    };
    this.watched.set(session, w);
    session.once("close", () => this.forget(session));
    // A new session has written its SETTINGS: armed from the start.
    this.arm(w);
    if (!reported) return IGNORED;
    const active = () => this.arm(w);
    session.on("stream", (stream: Http2Stream) => {
      w.streams?.add(stream);
      stream.once("close", () => w.streams?.delete(stream));
      active();
    });
    session.on("ping", active);
    session.on("remoteSettings", active);
    return {
      active,
      pingSent: () => {
        const timer = setTimeout(active, this.opts.stallMs);
        return (answered) => {
          clearTimeout(timer);
          if (answered) this.answered(w);
        };
      },
    };
  }

  get size(): number {
    return this.watched.size;
  }

  /** Sessions the tick looks at now (idle reported sessions are not among them). */
  get armedSize(): number {
    return this.armed.size;
  }

  /** Stops watching everything, new sessions included (the sessions themselves are left alone). */
  close(): void {
    this.watched.clear();
    this.armed.clear();
    this.stopTimer();
  }

  private arm(w: Watched): void {
    if (w.armed || this.watched.get(w.session) !== w) return;
    w.armed = true;
    this.armed.add(w);
    this.timer ??= setInterval(() => this.tick(), this.opts.tickMs).unref();
  }

  private disarm(w: Watched): void {
    w.armed = false;
    this.armed.delete(w);
    if (this.armed.size === 0) this.stopTimer();
  }

  private forget(session: Http2Session): void {
    const w = this.watched.get(session);
    this.watched.delete(session);
    if (w) this.disarm(w);
  }

  /** The peer answered a PING: it has read everything written before the answer. */
  private answered(w: Watched): void {
    w.pingSentAt = null;
    w.answeredWritten = (w.socket as Counted).bytesWritten ?? 0;
  }

  /** Whether a stream of `w` still has data to send (sent by Node as the peer opens windows). */
  private sending(w: Watched): boolean {
    if (w.streams) for (const s of w.streams) if (s.writableLength > 0) return true;
    return false;
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private tick(): void {
    const now = Date.now();
    for (const w of this.armed) {
      const c = w.socket as Counted;
      const read = c.bytesRead ?? 0;
      const written = c.bytesWritten ?? 0;
      const changed = read !== w.read || written !== w.written;
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
      if (!askable) {
        // Nothing outstanding: a reported session leaves the tick until its owner reports more.
        if (w.reported && !changed && !this.sending(w)) this.disarm(w);
        continue;
      }
      if (now - w.readAt < this.opts.stallMs) continue;
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
        if (!err) this.answered(w);
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
