/**
 * The noisy tenant of the `fairness` scenario, as a process of its own (its TLS handshakes would
 * otherwise run on the event loop of the client that measures the quiet tenant):
 *   noisy-main.ts --port=P --target=HOST:PORT --ca=F --cert=F --key=F --source=ADDR
 *                 --stalled=N --dialers=M --result=F
 *  1. opens N tunnels through HTTP CONNECT (one mTLS connection each, the tenant's caller
 *     certificate), checks each with a PING, asks each for an endless download and never reads
 *     again: stalled readers that hold N of the tenant's tunnels;
 *  2. prints {"ready":N} and starts a dial storm: M loops, each dialing CONNECT over a new mTLS
 *     connection, back to back, counting the answers (200, 429, other) and the connections that
 *     ended without one;
 *  3. on SIGTERM writes its counts as JSON to the result file and exits, which closes every
 *     connection it holds.
 * Every connection comes from `--source` (127.0.0.3…): the noisy tenant's kube-apiserver is not
 * the quiet one's host, so the server's per-source limits (TLS handshakes in progress) apply to it
 * alone, as they would in a real deployment.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:https";
import type { Socket } from "node:net";
import { command, ENDLESS, Op, PING, PONG } from "./protocol.js";
import { now, sleep } from "./util.js";

/** What the scenario reads back. */
export interface StormResult {
  /** Stalled tunnels opened, and those the server closed before the end (expected: none). */
  stalled: number;
  stalledLost: number;
  /** Dials of the storm by answer, and dials whose connection ended without an answer. */
  ok: number;
  refused: number;
  otherStatus: number;
  noAnswer: number;
  firstNoAnswer?: string;
  /** From the first storm dial to SIGTERM. */
  stormMs: number;
}

const OPEN_TIMEOUT_MS = 30_000;
const DIAL_TIMEOUT_MS = 15_000;
/** Stalled readers opened at a time (the server's per-source handshake limit is 64). */
const OPEN_CONCURRENCY = 16;

function arg(name: string): string {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  if (!a) throw new Error(`--${name}= is required`);
  return a.slice(name.length + 3);
}

const port = Number(arg("port"));
const target = arg("target");
const tls = { ca: readFileSync(arg("ca")), cert: readFileSync(arg("cert")), key: readFileSync(arg("key")) };
const source = arg("source");
const stalledWanted = Number(arg("stalled"));
const dialers = Number(arg("dialers"));
const resultFile = arg("result");

type Answer = { status: number; socket: Socket } | { error: string };

/** One CONNECT over a new mTLS connection: the answer's status and the tunnel, or why none came. */
function connect(): Promise<Answer> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (a: Answer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(a);
    };
    const req = request({
      host: "127.0.0.1",
      port,
      localAddress: source,
      method: "CONNECT",
      path: target,
      headers: { host: target },
      agent: false,
      servername: "localhost",
      ...tls,
    });
    const timer = setTimeout(() => req.destroy(new Error("no answer in time")), DIAL_TIMEOUT_MS);
    req.once("connect", (res, socket) => {
      socket.on("error", () => {});
      finish({ status: res.statusCode ?? 0, socket });
    });
    req.once("response", (res) => {
      res.resume();
      res.socket?.destroy();
      finish({ error: `HTTP ${res.statusCode} outside CONNECT` });
    });
    req.once("error", (err) => finish({ error: err.message }));
    req.end();
  });
}

/** PING → PONG on a new tunnel, then the endless download its reader never reads. */
function stall(socket: Socket): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error("no answer to PING")), DIAL_TIMEOUT_MS);
    const onData = (c: Buffer) => {
      socket.off("data", onData);
      socket.off("close", onClose);
      socket.pause();
      clearTimeout(timer);
      if (c[0] !== PONG || c.length !== 1) {
        fail(new Error("the answer to PING was not PONG"));
        return;
      }
      socket.write(command(Op.DOWNLOAD, ENDLESS));
      resolve();
    };
    const onClose = () => fail(new Error("closed before the answer to PING"));
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.on("data", onData);
    socket.once("close", onClose);
    socket.write(PING);
    socket.resume();
  });
}

const held: Socket[] = [];
const counts: StormResult = {
  stalled: 0,
  stalledLost: 0,
  ok: 0,
  refused: 0,
  otherStatus: 0,
  noAnswer: 0,
  stormMs: 0,
};
let stormStart = 0;
let stopping = false;

/**
 * Opens the stalled readers; a 429 (the dial-rate bucket not yet refilled since the last round,
 * or the server not yet done closing the last round's tunnels) is retried after a pause.
 */
async function openStalled(): Promise<void> {
  const deadline = now() + OPEN_TIMEOUT_MS;
  let next = 0;
  const worker = async () => {
    while (next < stalledWanted) {
      next++;
      for (;;) {
        if (now() > deadline)
          throw new Error(`stalled readers: ${held.length} of ${stalledWanted} open in time`);
        const a = await connect();
        if ("error" in a) {
          // Reset before TLS: this source is still throttled for the last round's storm
          // (lib/transport/refusal-throttle.ts); the scenario waits that out, so this is rare.
          await sleep(100);
          continue;
        }
        if (a.status === 429) {
          a.socket.destroy();
          await sleep(100);
          continue;
        }
        if (a.status !== 200) {
          a.socket.destroy();
          throw new Error(`stalled reader: CONNECT answered ${a.status}`);
        }
        await stall(a.socket);
        held.push(a.socket);
        a.socket.once("close", () => {
          if (!stopping) counts.stalledLost++;
        });
        break;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(OPEN_CONCURRENCY, stalledWanted) }, worker));
  counts.stalled = held.length;
}

async function dialer(): Promise<void> {
  while (!stopping) {
    const a = await connect();
    if ("error" in a) {
      counts.noAnswer++;
      counts.firstNoAnswer ??= a.error;
      // A connection closed at once (a per-source limit) must not make this a busy loop.
      await new Promise((r) => setImmediate(r));
      continue;
    }
    a.socket.destroy();
    if (a.status === 200) counts.ok++;
    else if (a.status === 429) counts.refused++;
    else counts.otherStatus++;
  }
}

process.once("SIGTERM", () => {
  stopping = true;
  counts.stormMs = stormStart ? now() - stormStart : 0;
  writeFileSync(resultFile, `${JSON.stringify(counts)}\n`);
  process.exit(0);
});

openStalled().then(
  () => {
    process.stdout.write(`${JSON.stringify({ ready: held.length })}\n`);
    stormStart = now();
    for (let i = 0; i < dialers; i++) void dialer();
  },
  (err: unknown) => {
    process.stderr.write(`noisy tenant: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  },
);
