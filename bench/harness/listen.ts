/**
 * Time to listen: from a server's spawn until its agent port on loopback accepts a TCP connection,
 * polled every millisecond. What decides how soon a restarted (or replaced) instance serves
 * again; `startup` and `scale` report it.
 */
import { connect } from "node:net";
import { LOOPBACK } from "./ports.js";
import type { Child } from "./procs.js";
import { now, sleep } from "./util.js";

/** How long a server may take to listen before the sample fails. */
const LISTEN_WAIT_MS = 20_000;
/** The poll's own resolution: a millisecond against start-ups of tens to hundreds. */
const LISTEN_POLL_MS = 1;

/** Resolves with the ms from `t0` until `port` on loopback accepts a TCP connection. */
export async function timeToListen(server: Child, port: number, t0: number): Promise<number> {
  const deadline = t0 + LISTEN_WAIT_MS;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = connect({ host: LOOPBACK, port });
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (ok) return now() - t0;
    if (!server.alive) throw new Error(`${server.name} exited before listening\n${server.tail()}`);
    if (now() > deadline) throw new Error(`${server.name}: not listening within ${LISTEN_WAIT_MS} ms`);
    await sleep(LISTEN_POLL_MS);
  }
}
