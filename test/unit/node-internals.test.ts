/**
 * The Node internals kgw relies on (lib/transport/node-internals.ts) on the Node running the
 * tests: each probe passes, the self-check is cheap enough for start-up, and a changed internal
 * stops the process with an error naming the Node version and the internal.
 */
import { createServer, connect as netConnect, type Socket } from "node:net";
import { describe, expect, it } from "vitest";
import {
  checkNodeInternals,
  type InternalProbe,
  NODE_INTERNALS,
  onClientSockets,
  tcpPeerGone,
} from "../../lib/transport/node-internals.js";

describe("Node internals", () => {
  it.each(NODE_INTERNALS.map((p) => [p.internal, p] as const))("%s is as kgw uses it", (_name, probe) => {
    expect(probe.check()).toBeNull();
  });

  it("the self-check passes on this Node and opens no connection", () => {
    let sockets = 0;
    const stop = onClientSockets(() => sockets++);
    try {
      checkNodeInternals(NODE_INTERNALS.slice());
    } finally {
      stop();
    }
    expect(sockets).toBe(1); // its own probe socket, destroyed before it connected
    expect(() => checkNodeInternals()).not.toThrow();
  });

  it("a changed internal stops start-up, naming the Node version and the internal", () => {
    const changed: InternalProbe = { internal: "TLSSocket._parent", check: () => "gone" };
    const throwing: InternalProbe = {
      internal: "Socket._handle",
      check: () => {
        throw new Error("boom");
      },
    };
    const fine: InternalProbe = { internal: "fine", check: () => null };
    expect(() => checkNodeInternals([fine, changed, throwing])).toThrow(
      `Node.js ${process.version} is not supported: internals kgw relies on have changed ` +
        "(lib/transport/node-internals.ts): TLSSocket._parent: gone; Socket._handle: checking it threw: boom",
    );
    expect(() => checkNodeInternals([fine])).not.toThrow();
  });

  it("tcpPeerGone: a connected socket has its peer; one whose peer reset it has not", async () => {
    const server = createServer();
    const accepted = new Promise<Socket>((resolve) => server.once("connection", resolve));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as { port: number };
    const client = netConnect({ host: "127.0.0.1", port });
    client.on("error", () => {});
    await new Promise((resolve) => client.once("connect", resolve));
    const peer = await accepted;
    try {
      expect(tcpPeerGone(client)).toBe(false);
      // Not reading: the reset is not read as an error that destroys the socket, as on a
      // session stuck on a failed write.
      client.pause();
      peer.resetAndDestroy();
      await expect.poll(() => tcpPeerGone(client), { timeout: 2_000 }).toBe(true);
    } finally {
      client.destroy();
      peer.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
