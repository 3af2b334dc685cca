/**
 * Ends a caller's socket with a TCP reset (RST) instead of a FIN, so that the caller reads an
 * error (ECONNRESET) rather than a clean end of stream. HTTP CONNECT has no other way to say that
 * a tunnel broke: after a FIN, a caller that reads until EOF (kube-apiserver streaming a log)
 * takes half a transfer for the whole.
 *
 * Node resets only a socket whose handle is TCP (`resetAndDestroy`). A TLS socket's handle is the
 * TLS layer over the TCP socket Node's TLS server wrapped, which Node keeps in the undocumented
 * `_parent` field: a debt, kept in node-internals.ts and checked there at start-up, and the
 * lifecycle test (a caller over mTLS sees ECONNRESET) fails if it stops working. Resetting that TCP
 * socket closes the TLS socket with it. Destroying the TLS socket before that close has completed
 * crashes Node 20 (the TLS layer then closes a handle already closing), so callers must leave it to
 * close on its own.
 *
 * Unix sockets have no reset: such a socket is destroyed and its peer reads EOF.
 *
 * A reset overtakes what the caller has not read yet, and a libuv-based caller with unread bytes
 * reads it as a clean EOF: a broken tunnel goes through break-socket.ts, which signals in order.
 */
import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";
import { tlsTransport } from "./node-internals.js";

/** What `resetSocket` did: `reset` sent an RST, `destroyed` could only close. */
export type ResetOutcome = "reset" | "destroyed";

export function resetSocket(socket: Socket): ResetOutcome {
  const tcp = socket instanceof TLSSocket ? tlsTransport(socket) : socket;
  // libuv refuses to reset a socket whose end (FIN) is already under way (uv_tcp_close_reset:
  // EINVAL), and Node then neither resets nor closes its handle: such a socket is only closed.
  if (tcp && !tcp.destroyed && !socket.writableEnded && !tcp.writableEnded) {
    try {
      tcp.resetAndDestroy();
      return "reset";
    } catch (err) {
      // A Unix socket, or TLS over something other than TCP: no reset exists for it.
      if ((err as NodeJS.ErrnoException).code !== "ERR_INVALID_HANDLE_TYPE") throw err;
    }
  }
  socket.destroy();
  return "destroyed";
}
