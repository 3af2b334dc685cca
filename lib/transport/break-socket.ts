/**
 * Ends a broken tunnel's CONNECT socket so that its caller reads an error, never a clean end of
 * stream, whatever it has not read yet.
 *
 * A TCP reset alone does not do that. A reset overtakes what the caller has not read: the bytes
 * still queued on our side are dropped, and a caller built on libuv (every Node.js client) that
 * still has unread bytes in its own receive buffer when the reset arrives reads them and then a
 * clean EOF: libuv's stream poll (src/unix/stream.c, uv__stream_io) takes POLLHUP after a short
 * read for the end of the stream and never reads the pending ECONNRESET. Measured with
 * scripts/owner-kill-loop.ts: callers behind on reading when their tunnel broke read a clean end
 * every time; a plain read loop (Go, Python) sees the reset.
 *
 * So on TLS, the signal travels in order with the data: once everything written so far has
 * reached the kernel, the TCP socket under the TLS layer gets one record that no TLS
 * implementation accepts at that point (a plaintext fatal alert, internal_error). The caller
 * reads every byte sent before the break and then fails on that record (Node:
 * ERR_SSL_BAD_RECORD_TYPE; Go: a record error), never a clean end. It then closes, and we reset
 * the socket; a caller that does not read it within BROKEN_TUNNEL_LINGER_MS is reset anyway.
 *
 * The record is written to the TCP socket Node's TLS server wrapped (`_parent`: reset-socket.ts
 * explains it, node-internals.ts owns it), bypassing the TLS layer, which must be idle for that:
 * the TLS layer takes the completion of a write on its TCP stream for its own, which is harmless
 * only while it has no write of its own in flight. Hence `whenFlushed`: the record goes out once
 * every write the tunnel made has completed. A plaintext TCP socket can only be reset, and a Unix
 * socket only closed (EOF): there is no in-band signal without a framing layer.
 */
import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";
import { tlsTransport } from "./node-internals.js";
import { type ResetOutcome, resetSocket } from "./reset-socket.js";

/**
 * How long a broken tunnel's TLS socket waits for its caller to read up to the failing record
 * and close, before it is reset anyway: long enough for a caller relaying to a slow client to
 * catch up (a reset before it has read everything may be read as a clean end, see above), short
 * enough that broken tunnels do not pile up descriptors.
 */
export const BROKEN_TUNNEL_LINGER_MS = 30_000;

/**
 * A TLS 1.2-format record header and body: a fatal alert (level 2), internal_error (80), in the
 * clear. After the handshake every record must be encrypted: TLS 1.3 readers refuse the record
 * type, TLS 1.2 readers fail to decrypt it; both are errors, never an end of stream.
 */
const FAILING_RECORD = Buffer.from([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50]);

/** `signalled`: the failing record was queued after the data (TLS); otherwise what the reset did. */
export type BreakOutcome = "signalled" | ResetOutcome;

export interface BreakOptions {
  /**
   * Calls `cb` once every write made to the socket so far has completed (the bytes are in the
   * kernel). May never call it, for a caller that stopped reading: the linger then resets.
   */
  whenFlushed(cb: () => void): void;
  /** BROKEN_TUNNEL_LINGER_MS unless told otherwise (tests). */
  lingerMs?: number;
}

/** Breaks `socket` off (see the file comment); nothing more may be written to it. */
export function breakSocket(socket: Socket, opts: BreakOptions): BreakOutcome {
  const tcp = socket instanceof TLSSocket ? tlsTransport(socket) : null;
  if (!tcp || tcp.destroyed || socket.destroyed || socket.writableEnded) return resetSocket(socket);
  let settled = false;
  const reset = () => {
    if (settled) return;
    settled = true;
    clearTimeout(timer);
    resetSocket(socket);
  };
  const timer = setTimeout(reset, opts.lingerMs ?? BROKEN_TUNNEL_LINGER_MS);
  timer.unref();
  socket.once("close", () => {
    settled = true;
    clearTimeout(timer);
  });
  // The caller's answer to the record is to close its end: reset ours then. Reading goes on
  // (whatever it sends is dropped by the caller of breakSocket) so that its end is seen.
  socket.once("end", reset);
  socket.resume();
  opts.whenFlushed(() => {
    if (!settled && !tcp.destroyed) tcp.write(FAILING_RECORD);
  });
  return "signalled";
}
