/**
 * The benchmark backend's wire protocol, kept tiny so the backend is never the bottleneck.
 *
 * The client speaks first (as kube-apiserver does: a server that greets first races upstream's
 * CONNECT handler, which may forward backend bytes before its "200" line). Commands are 9 bytes:
 * an op byte and a big-endian uint64 N.
 *  - PING: the backend answers one byte (PONG) and waits for the next command. "Dial to first
 *    byte" is the time from the dial request to the PONG of a PING sent as soon as the tunnel
 *    is up; repeated PINGs measure round trips on an open tunnel.
 *  - DOWNLOAD: the backend sends N bytes as fast as the socket takes them.
 *  - UPLOAD: the backend counts what it receives and reports the running total as a
 *    big-endian uint64 every ACK_EVERY bytes and when N is reached, so a sender knows when its
 *    bytes arrived rather than when it handed them to its socket.
 * DOWNLOAD and UPLOAD are the connection's last command. A client that sends nothing more keeps
 * an idle connection (the memory scenario).
 */
export const PONG = 0x4b;
export const Op = { PING: 0x50, DOWNLOAD: 0x44, UPLOAD: 0x55 } as const;
export type Op = (typeof Op)[keyof typeof Op];

export const COMMAND_BYTES = 9;
export const ACK_BYTES = 8;
export const ACK_EVERY = 4 * 1024 * 1024;
/** "Until the client hangs up": larger than anything a run can move. */
export const ENDLESS = 2 ** 50;

export function command(op: Op, n: number): Buffer {
  const b = Buffer.alloc(COMMAND_BYTES);
  b[0] = op;
  b.writeBigUInt64BE(BigInt(n), 1);
  return b;
}

export function ack(total: number): Buffer {
  const b = Buffer.alloc(ACK_BYTES);
  b.writeBigUInt64BE(BigInt(total), 0);
  return b;
}

export const PING = command(Op.PING, 0);
