/**
 * One established backend TCP connection of a server stream, and the two data directions
 * between them. Nothing is queued here; each direction pushes back on its source:
 *  - backend → server: when the stream's sink is full, this socket stops being read until the
 *    sink drains (TCP flow control then slows the backend);
 *  - server → backend: with an upstream server, when the socket's write buffer is full the
 *    whole server stream stops being read until the socket drains (the upstream protocol has no
 *    per-connection flow control; upstream's agent does the same). With our server (credit
 *    mode, lib/tunnel/flow-control.ts) the stream is never paused: the server sends at most a
 *    window of unconsumed bytes, and credit goes back as the socket takes them.
 */
import type { Socket } from "node:net";
import type { Logger } from "../observability/logger.js";
import { dataPacket, type Packet } from "../proto/packet.js";
import type { ConnectionCredit } from "../tunnel/flow-control.js";
import type { PauseLatch } from "../tunnel/pause-latch.js";
import { BACKEND_CLOSE_FLUSH_TIMEOUT_MS } from "./durations.js";

/** What a connection needs from the stream that carries it. */
export interface EndpointStreamSide {
  send(packet: Packet): boolean;
  onceWritable(cb: () => void): void;
  /** Pauses reading the server stream while any connection is backed up. */
  readonly readLatch: PauseLatch;
  /** The backend closed on its own (EOF or error); `error` is "" for a clean close. */
  backendClosed(conn: EndpointConnection, error: string): void;
}

type State = "open" | "closing" | "gone";

export class EndpointConnection {
  /**
   * open: carrying data; closing: the server closed it, we are flushing towards the backend
   * and ignore what the backend still sends; gone: socket destroyed or closed.
   */
  private state: State = "open";
  private lastError: Error | undefined;
  private waitingForSink = false;
  private blockingStream = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private onFlushed: (() => void) | undefined;
  /** The socket is corked until the end of this tick (see `write`). */
  private corked = false;
  /** Ends that cork; on a socket that ended or went meanwhile it does nothing. */
  private readonly uncork = () => {
    this.corked = false;
    this.socket.uncork();
  };

  constructor(
    readonly connectId: bigint,
    private readonly socket: Socket,
    private readonly side: EndpointStreamSide,
    private readonly log: Logger,
    /** Per-connection flow control, when the server agreed to it. */
    private readonly credit?: ConnectionCredit,
  ) {
    socket.on("data", (chunk: Buffer) => this.fromBackend(chunk));
    socket.on("error", (err) => {
      this.lastError = err;
    });
    socket.once("close", () => this.onClose());
  }

  /** DATA from the server. */
  write(data: Uint8Array): void {
    // The backend already ended its side (FIN): the close is on its way; writing would only
    // provoke "write after end".
    if (this.state !== "open" || this.socket.writableEnded || this.socket.destroyed) return;
    // One received chunk often carries the end of one DATA frame and the start of the next,
    // handed over as two views (lib/proto/tunnel-frames.ts, "views"): corked until the end of
    // this tick, they reach the backend in one writev instead of a write each.
    if (!this.corked) {
      this.corked = true;
      this.socket.cork();
      process.nextTick(this.uncork);
    }
    const credit = this.credit;
    if (credit) {
      const n = data.byteLength;
      if (!credit.received(n)) {
        this.lastError = new Error("server sent past its flow-control window");
        this.socket.destroy();
        return;
      }
      this.socket.write(data, (err) => err || credit.released(n));
      return;
    }
    if (this.socket.write(data) || this.blockingStream) return;
    this.blockingStream = true;
    this.side.readLatch.block(this);
    this.socket.once("drain", () => this.unblockStream());
  }

  /**
   * CLOSE_REQ from the server: send our FIN after what is already written, discard whatever the
   * backend still sends, and destroy the socket if it does not close in time. `onClosed` runs
   * once the socket is gone.
   */
  closeFromServer(onClosed: () => void): void {
    if (this.state !== "open") return;
    this.state = "closing";
    this.onFlushed = onClosed;
    this.unblockStream();
    this.flushTimer = setTimeout(() => this.socket.destroy(), BACKEND_CLOSE_FLUSH_TIMEOUT_MS);
    this.flushTimer.unref();
    this.socket.end();
    // Keep reading (and dropping) so the backend's FIN is seen and the socket can close.
    this.socket.resume();
  }

  /** The server stream is gone: drop the connection now, nothing is reported. */
  abort(): void {
    if (this.state === "gone") return;
    this.state = "gone";
    this.credit?.cancel();
    this.unblockStream();
    this.socket.destroy();
  }

  /** The server returned credit for this connection. */
  replenish(bytes: number): void {
    this.credit?.replenish(bytes);
  }

  private fromBackend(chunk: Buffer): void {
    if (this.state !== "open") return;
    const credit = this.credit;
    let writable = true;
    if (credit) {
      writable = credit.write(chunk, (part) =>
        this.state === "open" ? this.side.send(dataPacket(this.connectId, part)) : true,
      );
    } else {
      writable = this.side.send(dataPacket(this.connectId, chunk));
    }
    if (writable || this.waitingForSink) return;
    this.waitingForSink = true;
    this.socket.pause();
    const resume = () => {
      this.waitingForSink = false;
      if (this.state === "open") this.socket.resume();
    };
    if (credit) credit.onceCredit(() => this.side.onceWritable(resume));
    else this.side.onceWritable(resume);
  }

  private unblockStream(): void {
    if (!this.blockingStream) return;
    this.blockingStream = false;
    this.side.readLatch.unblock(this);
  }

  private onClose(): void {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    const wasOpen = this.state === "open";
    this.state = "gone";
    this.unblockStream();
    this.onFlushed?.();
    if (!wasOpen) return;
    const error = this.lastError ? this.lastError.message : "";
    this.log.debug({ err: this.lastError?.message }, "backend closed the connection");
    this.side.backendClosed(this, error);
  }
}
