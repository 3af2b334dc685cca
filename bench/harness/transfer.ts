/**
 * Measurements over an open connection: bulk download and upload (bounded by bytes and by time,
 * whichever comes first), echo round trips, and sustained dial rates.
 */

import type { Conn, Opener } from "./paths.js";
import { DIAL_TIMEOUT_MS, ping } from "./paths.js";
import { PatternCheck, PatternSource, randomStart } from "./pattern.js";
import { ACK_BYTES, command, ENDLESS, MISMATCH_BIT, Op } from "./protocol.js";
import { mbPerSecond } from "./stats.js";
import { now, sleep, withTimeout } from "./util.js";

/** Bytes handed to the socket per upload write. */
const WRITE_BYTES = 256 * 1024;

/** Bytes arrived that are not the ones sent: never expected, whatever else goes wrong. */
export class ContentMismatch extends Error {
  override readonly name = "ContentMismatch";
}

export interface Transfer {
  bytes: number;
  ms: number;
  mbps: number;
}

/**
 * Asks the backend for `maxBytes` and checks every byte against the pattern; stops at `maxBytes`
 * or after `maxMs`. Timed from sending the command to the last byte received. Fails on a byte
 * that differs, on more bytes than asked for, and on a connection that closes first.
 */
export function download(conn: Conn, maxBytes: number, maxMs: number): Promise<Transfer> {
  const s = conn.socket;
  const start = randomStart();
  const check = new PatternCheck(start);
  return new Promise((resolve, reject) => {
    let bytes = 0;
    const t0 = now();
    let tLast = t0;
    let finished = false;
    const finish = (err?: Error) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      s.off("data", onData);
      s.off("close", onClose);
      s.pause();
      if (err) reject(err);
      else resolve({ bytes, ms: tLast - t0, mbps: mbPerSecond(bytes, tLast - t0) });
    };
    const onData = (c: Buffer) => {
      if (!check.accept(c)) {
        finish(
          new ContentMismatch(
            `download: the bytes from ${check.checked} on differ from what the backend sent`,
          ),
        );
        return;
      }
      bytes += c.length;
      tLast = now();
      if (bytes > maxBytes)
        finish(new ContentMismatch(`download: ${bytes} bytes arrived, ${maxBytes} were asked for`));
      else if (bytes === maxBytes) finish();
    };
    const onClose = () =>
      finish(new Error(`download: connection closed after ${bytes} of ${maxBytes} bytes`));
    const timer = setTimeout(finish, maxMs);
    s.on("data", onData);
    s.once("close", onClose);
    s.write(command(Op.DOWNLOAD, maxBytes, start));
    s.resume();
  });
}

/**
 * Sends up to `maxBytes` of the pattern for at most `maxMs`; the figure is what the backend
 * acknowledged as received (it checks every byte), over the time until its last acknowledgement
 * arrived. Fails when the backend reports a byte that differs and on a connection that closes
 * first.
 */
export function upload(conn: Conn, maxBytes: number, maxMs: number): Promise<Transfer> {
  const s = conn.socket;
  const start = randomStart();
  const source = new PatternSource(start);
  return new Promise((resolve, reject) => {
    const t0 = now();
    let acked = 0;
    let tAck = t0;
    let sent = 0;
    let pending: Buffer = Buffer.alloc(0);
    let finished = false;
    const finish = (err?: Error) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      s.off("data", onData);
      s.off("close", onClose);
      s.off("drain", pump);
      s.pause();
      if (err) reject(err);
      else resolve({ bytes: acked, ms: tAck - t0, mbps: mbPerSecond(acked, tAck - t0) });
    };
    const onData = (c: Buffer) => {
      pending = pending.length === 0 ? c : Buffer.concat([pending, c]);
      while (pending.length >= ACK_BYTES) {
        const total = pending.readBigUInt64BE(0);
        pending = pending.subarray(ACK_BYTES);
        if (total & MISMATCH_BIT) {
          const at = total & ~MISMATCH_BIT;
          finish(new ContentMismatch(`upload: the backend received bytes that differ from ${at} on`));
          return;
        }
        acked = Number(total);
        tAck = now();
      }
      if (acked >= maxBytes) finish();
    };
    const onClose = () =>
      finish(new Error(`upload: connection closed after ${acked} of ${maxBytes} bytes acknowledged`));
    const pump = () => {
      while (!finished && sent < maxBytes) {
        const n = Math.min(WRITE_BYTES, maxBytes - sent);
        sent += n;
        if (!s.write(source.next(n))) {
          s.once("drain", pump);
          return;
        }
      }
    };
    const timer = setTimeout(finish, maxMs);
    s.on("data", onData);
    s.once("close", onClose);
    s.resume();
    s.write(command(Op.UPLOAD, maxBytes, start));
    pump();
  });
}

export type Direction = "download" | "upload";

/** Opens a connection, moves bytes one way, closes it. */
export async function bulk(open: Opener, dir: Direction, maxBytes: number, maxMs: number): Promise<Transfer> {
  const conn = await withTimeout(open(), DIAL_TIMEOUT_MS, "dial");
  try {
    return await (dir === "download" ? download(conn, maxBytes, maxMs) : upload(conn, maxBytes, maxMs));
  } finally {
    conn.close();
  }
}

/** PING round trips on one open connection, in ms. */
export async function pingRoundTrips(open: Opener, count: number): Promise<number[]> {
  const conn = await withTimeout(open(), DIAL_TIMEOUT_MS, "dial");
  const rtts: number[] = [];
  try {
    for (let i = 0; i < count; i++) {
      const t0 = now();
      await ping(conn.socket);
      rtts.push(now() - t0);
    }
    return rtts;
  } finally {
    conn.close();
  }
}

/**
 * Sequential dials, each to the first byte and closed at once; returns request-to-first-byte
 * times in ms.
 */
export async function dialLatencies(open: Opener, count: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < count; i++) {
    const conn = await withTimeout(open(), DIAL_TIMEOUT_MS, "dial");
    out.push(conn.dialMs);
    conn.close();
  }
  return out;
}

export interface Rate {
  perSecond: number;
  ok: number;
  errors: number;
  firstError?: string;
}

/**
 * `concurrency` loops, each running `task` back to back until `ms` have passed; the rate counts
 * completed tasks over the time until the last one finished. A loop backs off briefly after a
 * failure and gives up after 50 of them.
 */
export async function sustainedRate(
  task: () => Promise<void>,
  concurrency: number,
  ms: number,
): Promise<Rate> {
  const start = now();
  const deadline = start + ms;
  let ok = 0;
  let errors = 0;
  let firstError: string | undefined;
  const loop = async () => {
    let myErrors = 0;
    while (now() < deadline && myErrors < 50) {
      try {
        await withTimeout(task(), DIAL_TIMEOUT_MS, "dial");
        ok++;
      } catch (err) {
        errors++;
        myErrors++;
        firstError ??= err instanceof Error ? err.message : String(err);
        await sleep(10);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, loop));
  const elapsed = now() - start;
  return { perSecond: (ok * 1000) / elapsed, ok, errors, firstError };
}

/** Dial to first byte, then close: the unit of the dial-rate figures. */
export function dialAndClose(open: Opener): () => Promise<void> {
  return async () => {
    const conn = await open();
    conn.close();
  };
}

/**
 * The head-of-line measurement: `k` downloads at once for `windowMs`, optionally next to one
 * more connection whose reader never reads (it asked for an endless download and is paused).
 * Returns the aggregate MB/s of the `k` readers.
 */
export async function aggregateDownload(
  open: Opener,
  k: number,
  windowMs: number,
  stalled: boolean,
): Promise<number> {
  const conns: Conn[] = [];
  try {
    // Every dial happens before the stall: with head-of-line blocking a dial answer could not
    // get through afterwards, and this measures transfers, not dials.
    const opened = await openMany(open, stalled ? k + 1 : k);
    conns.push(...opened);
    const readers = opened.slice(0, k);
    if (stalled) {
      opened[k]!.socket.write(command(Op.DOWNLOAD, ENDLESS));
      // Let the stalled connection fill every buffer on its way before the others start.
      await sleep(Math.min(500, windowMs));
    }
    const results = await Promise.all(readers.map((c) => download(c, ENDLESS, windowMs)));
    const bytes = results.reduce((a, r) => a + r.bytes, 0);
    return mbPerSecond(bytes, windowMs);
  } finally {
    for (const c of conns) c.close();
  }
}

/** Opens `n` connections at once; if any fails, closes the others and throws. */
export async function openMany(open: Opener, n: number): Promise<Conn[]> {
  const settled = await Promise.allSettled(
    Array.from({ length: n }, () => withTimeout(open(), DIAL_TIMEOUT_MS, "dial")),
  );
  const conns = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
  const failed = settled.find((r) => r.status === "rejected");
  if (failed) {
    for (const c of conns) c.close();
    throw failed.reason;
  }
  return conns;
}
