/**
 * resetSocket on a socket whose end (FIN) is already under way: libuv refuses the reset
 * (uv_tcp_close_reset: EINVAL), and Node then neither resets nor closes the handle. The function
 * must say so ("destroyed", not "reset") and the socket must still close.
 */
import { once } from "node:events";
import { type AddressInfo, createServer, connect as netConnect, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { resetSocket } from "../../lib/transport/reset-socket.js";

describe("resetSocket", () => {
  it("closes a socket whose end is under way instead of reporting a reset libuv refused", async () => {
    const accepted: Socket[] = [];
    const server = createServer((s) => accepted.push(s));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const client = netConnect((server.address() as AddressInfo).port, "127.0.0.1");
    client.on("data", () => {});
    client.on("error", () => {});
    await once(client, "connect");
    await expect.poll(() => accepted.length).toBe(1);
    const socket = accepted[0]!;
    const errors: string[] = [];
    socket.on("error", (err: NodeJS.ErrnoException) => errors.push(`${err.syscall} ${err.code}`));
    const closed = once(socket, "close");

    socket.write(Buffer.alloc(1024 * 1024));
    socket.end(); // the FIN is queued behind the write: the socket is shutting down
    expect(resetSocket(socket)).toBe("destroyed");
    await closed;
    expect(errors).toEqual([]);

    client.destroy();
    server.close();
    await once(server, "close");
  });

  it("resets a socket that is not ending", async () => {
    const accepted: Socket[] = [];
    const server = createServer((s) => accepted.push(s));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const client = netConnect((server.address() as AddressInfo).port, "127.0.0.1");
    const clientError = new Promise<string>((resolve) =>
      client.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? "")),
    );
    await once(client, "connect");
    await expect.poll(() => accepted.length).toBe(1);
    const closed = once(accepted[0]!, "close");
    expect(resetSocket(accepted[0]!)).toBe("reset");
    await closed;
    expect(await clientError).toBe("ECONNRESET");
    server.close();
    await once(server, "close");
  });
});
