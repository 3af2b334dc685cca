/**
 * The benchmark backend's wire protocol, kept tiny so the backend is never the bottleneck.
 *
 * The client speaks first (as kube-apiserver does: a server that greets first races upstream's
 * CONNECT handler, which may forward backend bytes before its "200" line). A command is an op
 * byte and a big-endian uint64 N; DOWNLOAD and UPLOAD add a big-endian uint32: where the transfer
 * enters the content pattern (pattern.ts).
 *  - PING (9 bytes): the backend answers one byte (PONG) and waits for the next command. "Dial to
 *    first byte" is the time from the dial request to the PONG of a PING sent as soon as the
 *    tunnel is up; repeated PINGs measure round trips on an open tunnel.
 *  - DOWNLOAD: the backend sends N bytes of the pattern as fast as the socket takes them; the
 *    client checks every byte.
 *  - UPLOAD: the client sends N bytes of the pattern; the backend checks every byte and reports
 *    the running total as a big-endian uint64 every ACK_EVERY bytes and when N is reached, so a
 *    sender knows when its bytes arrived rather than when it handed them to its socket. A total
 *    with MISMATCH_BIT set says the bytes after it differ from the pattern (the backend then
 *    stops counting).
 * DOWNLOAD and UPLOAD are the connection's last command. A client that sends nothing more keeps
 * an idle connection (the memory scenario).
 */
export const PONG = 0x4b;
export const Op = { PING: 0x50, DOWNLOAD: 0x44, UPLOAD: 0x55 } as const;
export type Op = (typeof Op)[keyof typeof Op];

const PING_BYTES = 9;
const TRANSFER_COMMAND_BYTES = 13;

export const ACK_BYTES = 8;
export const ACK_EVERY = 4 * 1024 * 1024;
export const MISMATCH_BIT = 1n << 63n;
/** "Until the client hangs up": larger than anything a run can move. */
export const ENDLESS = 2 ** 50;

/** The length of a command starting with `op` (an unknown op: the shortest). */
export function commandBytes(op: number): number {
  return op === Op.DOWNLOAD || op === Op.UPLOAD ? TRANSFER_COMMAND_BYTES : PING_BYTES;
}

export function command(op: Op, n: number, patternStart = 0): Buffer {
  const b = Buffer.alloc(commandBytes(op));
  b[0] = op;
  b.writeBigUInt64BE(BigInt(n), 1);
  if (b.length === TRANSFER_COMMAND_BYTES) b.writeUInt32BE(patternStart, 9);
  return b;
}

export interface Command {
  op: number;
  n: number;
  patternStart: number;
}

/** The command at the start of `buf`, or null if it is not complete yet. */
export function parseCommand(buf: Buffer): { command: Command; bytes: number } | null {
  if (buf.length === 0) return null;
  const bytes = commandBytes(buf[0]!);
  if (buf.length < bytes) return null;
  const patternStart = bytes === TRANSFER_COMMAND_BYTES ? buf.readUInt32BE(9) : 0;
  return { command: { op: buf[0]!, n: Number(buf.readBigUInt64BE(1)), patternStart }, bytes };
}

export function ack(total: number, mismatch = false): Buffer {
  const b = Buffer.alloc(ACK_BYTES);
  b.writeBigUInt64BE(BigInt(total) | (mismatch ? MISMATCH_BIT : 0n), 0);
  return b;
}

export const PING = command(Op.PING, 0);
