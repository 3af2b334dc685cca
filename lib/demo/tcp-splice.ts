/**
 * Two TCP connections joined as TCP through an NLB joins them: the bytes pass both ways, a FIN
 * is passed on while the other direction still flows (half-open: both sockets need
 * `allowHalfOpen`), and a reset is passed on as a reset, so a cut-off transfer never looks
 * finished.
 *
 * Invariant: one side's clean close never cuts the other. A side closes cleanly only once both
 * its directions have ended, and by then pipe has ended the other side's writing too; that side
 * is left to flush and close by itself. Destroying it instead would drop what it still holds for
 * its peer, and with bytes from that peer unread (or arriving after) the kernel answers with a
 * reset, which makes the peer discard what it had received and not yet read.
 */
import type { Socket } from "node:net";

export function splice(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  a.once("close", (hadError) => follow(b, hadError));
  b.once("close", (hadError) => follow(a, hadError));
}

function follow(socket: Socket, reset: boolean): void {
  if (socket.destroyed) return;
  if (reset) socket.resetAndDestroy();
  else socket.end();
}
