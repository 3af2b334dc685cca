/**
 * Slow TLS handshakes: connections to the server's TLS listeners that open TCP and then send
 * nothing, or a ClientHello one byte every SLOW_BYTE_EVERY_MS, held open for as long as the
 * server lets them. The server may close them (a handshake timeout, a cap on handshakes in
 * progress): that is counted, with how long each lasted, and is no failure; another connection
 * takes the closed one's place after SLOW_REOPEN_MS, so the count stays bounded.
 */
import { connect } from "node:net";
import { LOOPBACK } from "../harness/ports.js";
import { pause } from "../harness/util.js";
import { SLOW_BYTE_EVERY_MS, SLOW_PER_SOURCE, SLOW_REOPEN_MS, SLOW_SOURCES } from "./options.js";
import type { Tally } from "./tally.js";

/** The start of a TLS 1.2+ ClientHello record (handshake, version 3.1, 512 bytes), then zeros. */
const CLIENT_HELLO_START = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01];

/** One slow connection, until the server closes it (true) or we stop (false). */
function holdOne(
  port: number,
  localAddress: string,
  trickle: boolean,
  signal: AbortSignal,
): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: LOOPBACK, port, localAddress });
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => socket.destroy();
    socket.on("error", () => {});
    socket.once("connect", () => {
      if (!trickle) return;
      timer = setInterval(() => {
        socket.write(Buffer.from([CLIENT_HELLO_START[sent] ?? 0]));
        sent++;
      }, SLOW_BYTE_EVERY_MS);
    });
    socket.once("close", () => {
      clearInterval(timer);
      signal.removeEventListener("abort", onAbort);
      resolve(!signal.aborted);
    });
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

export async function runSlowHandshakes(ports: number[], tally: Tally, signal: AbortSignal): Promise<void> {
  const keep = async (port: number, source: string, trickle: boolean) => {
    while (!signal.aborted) {
      const opened = Date.now();
      tally.counts.slowOpened++;
      if (await holdOne(port, source, trickle, signal)) {
        tally.counts.slowClosedByServer++;
        tally.slowLifetimesMs.push(Date.now() - opened);
      }
      await pause(SLOW_REOPEN_MS, signal);
    }
  };
  const holders: Promise<void>[] = [];
  for (const port of ports) {
    for (const source of SLOW_SOURCES) {
      for (let i = 0; i < SLOW_PER_SOURCE; i++) holders.push(keep(port, source, i % 2 === 1));
    }
  }
  await Promise.all(holders);
}
