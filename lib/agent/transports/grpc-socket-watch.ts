/**
 * Destroys the TCP connections of the agent's gRPC channels whose server is gone: the client
 * side of what Http2PeerWatch (lib/transport/http2-peer-watch.ts) does on the server.
 *
 * grpc-js runs each channel on Node's HTTP/2 client session, which has the failure mode the
 * server's sessions have (nodejs/node#61304, #50884): when the agent is writing (a download
 * through it) as the server's reset arrives, the socket write fails with ECONNRESET and the
 * session is then neither destroyed nor reading. No "error" or "close" reaches grpc-js, its
 * channel stays READY and the call open, and the agent would believe itself connected until
 * keepalive, which cannot free such a session either: grpc-js answers a missed PING with
 * `session.destroy()`, which waits for the stuck write. Destroying the socket frees it, and
 * grpc-js then fails the call (UNAVAILABLE) as for any lost connection.
 *
 * grpc-js does not let a client hand it a connection or reach the one it made, short of its
 * private fields. Node publishes every client socket it creates on the `net.client.socket`
 * diagnostics channel; while a gRPC stream is being opened, the watch takes the sockets that
 * connect to that server's address, and from then on asks the kernel, every `tickMs`, whether
 * they still have a peer (getpeername: ENOTCONN once a reset arrived, `tcpPeerGone`; both
 * internals are lib/transport/node-internals.ts's). The
 * answer is certain, so there is no PING: upstream servers (grpc-go) answer pings more frequent
 * than their keepalive policy allows with GOAWAY too_many_pings, and a server that vanished
 * without a reset leaves a session that is not stuck, which --keepalive-time handles.
 */
import { isIP, type Socket } from "node:net";
import { onClientSockets, tcpPeerGone } from "../../transport/node-internals.js";

/** How often watched sockets are asked whether their peer is still there. */
export const GRPC_SOCKET_WATCH_TICK_MS = 250;

export interface WatchedAddress {
  /** As dialled: a name or an IP literal (no brackets). */
  host: string;
  port: number;
}

export class GrpcSocketWatch {
  private readonly expected = new Map<WatchedAddress, number>();
  private readonly watched = new Set<Socket>();
  private timer: NodeJS.Timeout | null = null;
  /** Stops taking client sockets; set while an address is expected. */
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly tickMs: number,
    /** True when the socket certainly has no peer any more. */
    private readonly disconnected: (socket: Socket) => boolean = tcpPeerGone,
  ) {}

  /**
   * Sockets that connect to `address` are watched until they close, from now until the returned
   * function is called (once the stream is open or has failed).
   */
  expect(address: WatchedAddress): () => void {
    this.expected.set(address, (this.expected.get(address) ?? 0) + 1);
    this.unsubscribe ??= onClientSockets(this.onSocket);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const n = (this.expected.get(address) ?? 1) - 1;
      if (n > 0) this.expected.set(address, n);
      else this.expected.delete(address);
      if (this.expected.size === 0 && this.unsubscribe) {
        this.unsubscribe();
        this.unsubscribe = null;
      }
    };
  }

  get size(): number {
    return this.watched.size;
  }

  private readonly onSocket = (socket: Socket): void => {
    socket.once("connect", () => {
      if (this.isExpected(socket)) this.watch(socket);
    });
  };

  private isExpected(socket: Socket): boolean {
    for (const { host, port } of this.expected.keys()) {
      if (socket.remotePort !== port) continue;
      // A name resolves to an address we cannot compare; the port alone decides then.
      if (isIP(host) === 0 || socket.remoteAddress === host) return true;
    }
    return false;
  }

  private watch(socket: Socket): void {
    if (socket.destroyed || this.watched.has(socket)) return;
    this.watched.add(socket);
    socket.once("close", () => this.forget(socket));
    this.timer ??= setInterval(() => this.tick(), this.tickMs).unref();
  }

  private forget(socket: Socket): void {
    this.watched.delete(socket);
    if (this.watched.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }

  private tick(): void {
    for (const socket of this.watched) {
      if (socket.destroyed) {
        this.forget(socket);
        continue;
      }
      if (!this.disconnected(socket)) continue;
      this.forget(socket);
      // Not the session: a stuck one waits for its write. grpc-js sees the socket close.
      socket.destroy();
    }
  }
}

/** The agent's one watch, shared by all its gRPC server connections. */
export const grpcSocketWatch = new GrpcSocketWatch(GRPC_SOCKET_WATCH_TICK_MS);
