/**
 * Every use of Node's undocumented internals, in one place, and a self-check that they are still
 * there. Four debts, each for a need Node gives no public way to meet:
 *
 * - `_parent`: the TCP socket a server-side TLS socket was made from (`tlsTransport`). Resetting
 *   it is the only way to end a TLS connection with an RST (reset-socket.ts), and writing to it
 *   the only way to put a failing record after the data (break-socket.ts).
 * - `_handle.getpeername`: the libuv handle of a TCP socket (`tcpPeerGone`), asked whether the
 *   kernel still knows a peer (ENOTCONN once a reset arrived): how a session stuck on a failed
 *   write is told apart (http2-peer-watch.ts, lib/agent/transports/grpc-socket-watch.ts).
 * - Client sockets published on the `net.client.socket` diagnostics channel
 *   (`onClientSockets`): the only way to reach the connections grpc-js makes for the agent.
 * - A TLS server starts TLS on a connection from its one `connection` listener, the one its
 *   constructor adds (`takeTlsStart`); Node documents that emitting `connection` hands it a
 *   connection, not that the listener can be taken out and called later. Taking it is the only
 *   way to accept a connection and start its handshake later (handshake-gate.ts: a burst waits
 *   its turn instead of being reset).
 *
 * `checkNodeInternals` runs once at start-up (`kgw server`, `kgw agent`): on a Node version where
 * one of them changed, the process refuses to start, naming the Node version and the internal,
 * instead of running without resets or stuck-session detection. It opens no connection (a
 * socket is made and destroyed before it connects) and costs about a millisecond.
 */
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { connect as netConnect, Socket } from "node:net";
import { constants as osConstants } from "node:os";
import type { Duplex } from "node:stream";
import { createServer as createTlsServer, TLSSocket, type Server as TlsServer } from "node:tls";

/** The TCP socket under a server-side TLS socket, when Node still exposes it as it does today. */
export function tlsTransport(socket: TLSSocket): Socket | null {
  const parent = (socket as TLSSocket & { _parent?: unknown })._parent;
  return parent instanceof Socket ? parent : null;
}

type Handle = { getpeername?: (out: object) => number };

/** The libuv handle of `socket`'s TCP connection (under TLS: its `_parent`'s). */
function tcpHandle(socket: Duplex): Handle | undefined {
  const s = socket as unknown as { _parent?: { _handle?: Handle }; _handle?: Handle };
  return s._parent?._handle ?? s._handle ?? undefined;
}

/**
 * Whether the kernel says the TCP socket under `socket` has lost its peer: getpeername() fails
 * with ENOTCONN once a reset arrived. When the handle's shape is not there it says false (the
 * caller's PING decides).
 */
export function tcpPeerGone(socket: Duplex): boolean {
  const handle = tcpHandle(socket);
  if (typeof handle?.getpeername !== "function") return false;
  return handle.getpeername({}) === -osConstants.errno.ENOTCONN;
}

/**
 * Takes out `server`'s `connection` listeners, as they are when called (before the server
 * listens: Node's own, which starts TLS), and returns a function that runs them on a connection:
 * the connection's handshake starts when that is called. A plain emitter (a test's fake server)
 * has none, and gets a function that does nothing.
 */
export function takeTlsStart(server: TlsServer): (socket: Socket) => void {
  const listeners = server.listeners("connection") as ((socket: Socket) => void)[];
  server.removeAllListeners("connection");
  return (socket) => {
    for (const l of listeners) l.call(server, socket);
  };
}

const NET_CLIENT_SOCKET = "net.client.socket";

/**
 * Calls `fn` with every client socket Node creates (`net.connect`, as grpc-js does) until the
 * returned function is called.
 */
export function onClientSockets(fn: (socket: Socket) => void): () => void {
  const listener = (message: unknown) => {
    const socket = (message as { socket?: Socket }).socket;
    if (socket && typeof socket.once === "function") fn(socket);
  };
  subscribe(NET_CLIENT_SOCKET, listener);
  return () => unsubscribe(NET_CLIENT_SOCKET, listener);
}

/** One internal and how to tell it is still as we use it: null when it is, else what is wrong. */
export interface InternalProbe {
  readonly internal: string;
  check(): string | null;
}

export const NODE_INTERNALS: readonly InternalProbe[] = [
  {
    internal: "tls.Server's connection listener",
    check() {
      const n = createTlsServer().listenerCount("connection");
      return n === 1 ? null : `a new TLS server has ${n} connection listeners, not the one that starts TLS`;
    },
  },
  {
    internal: "TLSSocket._parent",
    check() {
      const tcp = new Socket();
      const tls = new TLSSocket(tcp, { isServer: true });
      try {
        return tlsTransport(tls) === tcp ? null : "a server-side TLS socket does not name its TCP socket";
      } finally {
        tls.destroy();
        tcp.destroy();
      }
    },
  },
  {
    internal: `the ${NET_CLIENT_SOCKET} diagnostics channel and Socket._handle.getpeername`,
    check() {
      let published: Socket | null = null;
      const stop = onClientSockets((s) => {
        published = s;
      });
      // An IP literal connects on the next tick: destroyed now, the socket never does.
      const socket = netConnect({ host: "127.0.0.1", port: 9 });
      socket.on("error", () => {});
      try {
        if (published !== socket) return "net.connect's socket was not published";
        const getpeername = tcpHandle(socket)?.getpeername;
        if (typeof getpeername !== "function") return "a TCP socket's handle has no getpeername";
        const result: unknown = getpeername.call(tcpHandle(socket), {});
        // Not connected: a negative errno (EBADF before connect), as ENOTCONN is after a reset.
        if (typeof result !== "number" || result >= 0) return `getpeername returned ${String(result)}`;
        return null;
      } finally {
        stop();
        socket.destroy();
      }
    },
  },
];

let checked = false;

/**
 * Verifies every internal (NODE_INTERNALS) once per process; throws an Error naming the Node
 * version and each internal that changed.
 */
export function checkNodeInternals(probes: readonly InternalProbe[] = NODE_INTERNALS): void {
  if (checked && probes === NODE_INTERNALS) return;
  const problems: string[] = [];
  for (const probe of probes) {
    let problem: string | null;
    try {
      problem = probe.check();
    } catch (err) {
      problem = `checking it threw: ${(err as Error).message}`;
    }
    if (problem !== null) problems.push(`${probe.internal}: ${problem}`);
  }
  if (problems.length > 0) {
    throw new Error(
      `Node.js ${process.version} is not supported: internals kgw relies on have changed ` +
        `(lib/transport/node-internals.ts): ${problems.join("; ")}`,
    );
  }
  if (probes === NODE_INTERNALS) checked = true;
}
