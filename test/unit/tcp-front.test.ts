/**
 * The tests' TCP front (startTcpFront in test/helpers/fleet.ts), which plays the load balancer in
 * front of gateways in the drain, fleet and frozen-server tests, joins connections as the NLB
 * does: half-open both ways. An agent ending its drained connection in order sends its last
 * frames and a FIN, and reads the server's end as the answer that the server has read them all.
 * A front that closed the server's side as soon as the agent's side had ended cut those frames
 * off whenever the server was still behind in reading (under load): it reset the connection, the
 * server lost what it had not read yet, and broke the tunnels (ERR_AGENT_GONE).
 */
import { once } from "node:events";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { afterEach, expect, it } from "vitest";
import { startTcpFront, type TcpFront, waitUntil } from "../helpers/fleet.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/**
 * A target that reads nothing until `startReading()` (a server behind in reading), then counts
 * every byte to the client's end and answers with the count before ending its side.
 */
async function lateReader(): Promise<{ port: number; startReading(): void }> {
  const sockets: Socket[] = [];
  let reading = false;
  const serve = (s: Socket) => {
    let bytes = 0;
    s.on("data", (c: Buffer) => {
      bytes += c.length;
    });
    s.once("end", () => s.end(`read ${bytes}`));
    s.resume();
  };
  const server = createServer({ allowHalfOpen: true, pauseOnConnect: true }, (s) => {
    s.on("error", () => {});
    if (reading) serve(s);
    else sockets.push(s);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  return {
    port: (server.address() as AddressInfo).port,
    startReading() {
      reading = true;
      for (const s of sockets.splice(0)) serve(s);
    },
  };
}

/** What the client reads to its end, and how it ended. */
function readAll(socket: Socket): Promise<{ text: string; end: string }> {
  return new Promise((resolve) => {
    let text = "";
    let error: string | null = null;
    let clean = false;
    socket.on("data", (c: Buffer) => {
      text += c.toString();
    });
    socket.on("end", () => {
      clean = true;
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.once("close", () => resolve({ text, end: error ?? (clean ? "clean" : "closed without FIN") }));
  });
}

it("a target behind in reading gets every byte sent before the client's end, and its answer comes back", async () => {
  // The last frames of a drained stream: few enough that socket buffers hold them all, so the
  // client's FIN reaches the front while the target has read none of them.
  const BYTES = 64 * 1024;
  const target = await lateReader();
  const front: TcpFront = await startTcpFront(() => [target.port]);
  cleanups.push(() => front.close());
  const client = connect({ host: "127.0.0.1", port: front.port, allowHalfOpen: true });
  await once(client, "connect");
  const answer = readAll(client);
  client.end(Buffer.alloc(BYTES, 0x5a));
  // The ordering load produced: the client's end has reached the front before the target read.
  await waitUntil(() => front.clientEnds === 1, 5_000, "the client's end read by the front");
  target.startReading();
  expect(await answer).toEqual({ text: `read ${BYTES}`, end: "clean" });
  await waitUntil(() => front.open === 0, 5_000, "both connections closed");
});

it("passes a reset on as a reset", async () => {
  const resetter = createServer((s) => s.once("data", () => s.resetAndDestroy()));
  resetter.listen(0, "127.0.0.1");
  await once(resetter, "listening");
  cleanups.push(() => {
    resetter.close();
  });
  const front = await startTcpFront(() => [(resetter.address() as AddressInfo).port]);
  cleanups.push(() => front.close());
  const client = connect({ host: "127.0.0.1", port: front.port });
  await once(client, "connect");
  const ended = readAll(client);
  client.write("hello");
  expect((await ended).end).toBe("ECONNRESET");
});
