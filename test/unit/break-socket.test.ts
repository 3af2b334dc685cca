/**
 * breakSocket: a caller whose tunnel broke reads every byte sent before the break and then an
 * error, never a clean end, even when it was not reading at the time (the case a bare reset
 * loses: libuv reads a reset behind unread bytes as EOF); one that never reads is reset after the
 * linger; a plaintext socket is reset.
 */
import { once } from "node:events";
import { type AddressInfo, createServer, connect as netConnect, type Socket } from "node:net";
import { createServer as createTlsServer, type TLSSocket, connect as tlsConnect } from "node:tls";
import { beforeAll, describe, expect, it } from "vitest";
import { breakSocket } from "../../lib/transport/break-socket.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

/** Enough to fill the socket buffers of both ends on loopback: the caller is well behind. */
const SENT_BYTES = 8 * 1024 * 1024;

let pki: TestPki;

beforeAll(async () => {
  pki = await getTestPki();
});

/** A TLS server and a connected client; `serverSocket` is the accepted end. */
async function tlsPair(): Promise<{ client: TLSSocket; serverSocket: TLSSocket; close(): Promise<void> }> {
  const accepted: TLSSocket[] = [];
  const server = createTlsServer({ key: pki.server.keyPem, cert: pki.server.certPem }, (s) => {
    s.on("error", () => {});
    accepted.push(s);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const client = tlsConnect({
    port: (server.address() as AddressInfo).port,
    host: "127.0.0.1",
    servername: "localhost",
    ca: pki.ca.certPem,
  });
  await once(client, "secureConnect");
  await expect.poll(() => accepted.length).toBe(1);
  return {
    client,
    serverSocket: accepted[0]!,
    close: async () => {
      client.destroy();
      server.close();
      await once(server, "close");
    },
  };
}

/** Writes `n` bytes to `socket`, counting the writes not yet completed (as connect-frontend does). */
function writeTracked(socket: Socket, n: number) {
  let unflushed = 0;
  let waiter: (() => void) | null = null;
  const chunk = Buffer.alloc(64 * 1024, 7);
  for (let sent = 0; sent < n; sent += chunk.length) {
    unflushed++;
    socket.write(chunk, () => {
      unflushed--;
      if (unflushed === 0 && waiter) {
        const cb = waiter;
        waiter = null;
        cb();
      }
    });
  }
  return {
    whenFlushed: (cb: () => void) => {
      if (unflushed === 0) cb();
      else waiter = cb;
    },
  };
}

/** The socket's close (its errors, such as the caller's answering alert, are expected). */
function closeOf(s: Socket): Promise<void> {
  return new Promise((resolve) => s.once("close", () => resolve()));
}

/** Bytes read and the first end: "end" (clean) or the error's code. */
function reader(s: Socket) {
  let n = 0;
  s.on("data", (c: Buffer) => {
    n += c.length;
  });
  const ended = new Promise<string>((resolve) => {
    s.once("end", () => resolve("end"));
    s.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  s.on("error", () => {});
  return { bytes: () => n, ended };
}

describe("breakSocket", () => {
  it("gives a TLS caller that was not reading every byte, then an error, then closes", async () => {
    const { client, serverSocket, close } = await tlsPair();
    client.pause();
    const read = reader(client);
    const closed = closeOf(serverSocket);
    const tracked = writeTracked(serverSocket, SENT_BYTES);
    const outcome = breakSocket(serverSocket, tracked);
    client.resume(); // the caller catches up only now
    expect(await read.ended).toBe("ERR_SSL_BAD_RECORD_TYPE");
    expect(read.bytes()).toBe(SENT_BYTES);
    expect(outcome).toBe("signalled");
    await closed; // the caller answered the record and closed: the server's socket is gone
    await close();
  });

  it("resets a TLS caller that never reads, after the linger", async () => {
    const { client, serverSocket, close } = await tlsPair();
    client.pause();
    const closed = closeOf(serverSocket);
    const tracked = writeTracked(serverSocket, SENT_BYTES);
    expect(breakSocket(serverSocket, { ...tracked, lingerMs: 100 })).toBe("signalled");
    await closed;
    await close();
  });

  it("resets a plaintext TCP socket", async () => {
    const accepted: Socket[] = [];
    const server = createServer((s) => accepted.push(s));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const client = netConnect((server.address() as AddressInfo).port, "127.0.0.1");
    const read = reader(client);
    await once(client, "connect");
    await expect.poll(() => accepted.length).toBe(1);
    expect(breakSocket(accepted[0]!, { whenFlushed: (cb) => cb() })).toBe("reset");
    expect(await read.ended).toBe("ECONNRESET");
    server.close();
    await once(server, "close");
  });
});
