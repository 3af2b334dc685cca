/**
 * Ways to reach the backend, all resolving once the backend answered a PING sent as soon as the
 * connection was up (so "open" is timed from the request to the first byte):
 *  - plain TCP (direct, or into the first relay of the chain);
 *  - HTTP CONNECT over mTLS, one TLS connection per tunnel (what kube-apiserver does), through
 *    Node's https client;
 *  - gRPC through our TunnelClient (lib/client): a ProxyService.Proxy stream per tunnel, on a
 *    shared channel or on a channel of its own.
 * Clients run in the benchmark process; see docs/PERFORMANCE.md for why.
 */

import { request as httpsRequest } from "node:https";
import { connect as tcpConnect } from "node:net";
import type { Duplex } from "node:stream";
import { type ChannelCredentials, credentials } from "@grpc/grpc-js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import type { BenchPki } from "./pki.js";
import { LOOPBACK } from "./ports.js";
import { PING, PONG } from "./protocol.js";
import { now } from "./util.js";

/** How long any single dial may take before it counts as failed. */
export const DIAL_TIMEOUT_MS = 15_000;

export interface Conn {
  /** Paused, PING answered; attach a reader and call resume(). */
  socket: Duplex;
  /** Request to first byte, ms. */
  dialMs: number;
  close(): void;
}

export type Opener = () => Promise<Conn>;

/**
 * Sends PING and waits for the PONG, then leaves the socket paused: the "first byte". `head` is
 * what an HTTP client read past the CONNECT response (nothing, as the client speaks first).
 */
export function ping(socket: Duplex, head?: Buffer): Promise<void> {
  if (head && head.length > 0) {
    socket.destroy();
    return Promise.reject(new Error(`${head.length} unexpected bytes after the CONNECT response`));
  }
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error("no answer to PING")), DIAL_TIMEOUT_MS);
    const onData = (c: Buffer) => {
      socket.pause();
      if (c[0] !== PONG) {
        done(new Error(`answer to PING was 0x${c[0]!.toString(16)}, not PONG`));
        return;
      }
      if (c.length > 1) socket.unshift(c.subarray(1));
      done();
    };
    const onGone = () => done(new Error("closed before the first byte"));
    const done = (err?: Error) => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("end", onGone);
      socket.off("close", onGone);
      socket.off("error", onGone);
      if (err) {
        socket.destroy();
        reject(err);
      } else resolve();
    };
    socket.on("data", onData);
    socket.once("end", onGone);
    socket.once("close", onGone);
    socket.once("error", onGone);
    socket.write(PING);
    socket.resume();
  });
}

export function tcpOpener(port: number): Opener {
  return async () => {
    const t0 = now();
    const socket = tcpConnect({ port, host: LOOPBACK, noDelay: true });
    // Errors surface as "close"; a listener keeps them from becoming uncaught exceptions.
    socket.on("error", () => {});
    await ping(socket);
    return { socket, dialMs: now() - t0, close: () => socket.destroy() };
  };
}

export function connectOpener(pki: BenchPki, frontendPort: number, target: string): Opener {
  return () =>
    new Promise<Conn>((resolve, reject) => {
      const t0 = now();
      const timer = setTimeout(() => {
        req.destroy(new Error("CONNECT timed out"));
      }, DIAL_TIMEOUT_MS);
      const req = httpsRequest({
        host: LOOPBACK,
        port: frontendPort,
        method: "CONNECT",
        path: target,
        headers: { host: target },
        agent: false,
        servername: "localhost",
        ca: pki.caPem,
        cert: pki.frontendCertPem,
        key: pki.frontendKeyPem,
      });
      req.once("connect", (res, socket, head) => {
        clearTimeout(timer);
        socket.on("error", () => {});
        if (res.statusCode !== 200) {
          socket.destroy();
          reject(new Error(`CONNECT answered ${res.statusCode}`));
          return;
        }
        socket.setNoDelay(true);
        ping(socket, head).then(
          () => resolve({ socket, dialMs: now() - t0, close: () => socket.destroy() }),
          reject,
        );
      });
      req.once("response", (res) => {
        clearTimeout(timer);
        res.resume();
        reject(new Error(`CONNECT answered ${res.statusCode}`));
      });
      req.once("error", (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.end();
    });
}

export function frontendCredentials(pki: BenchPki): ChannelCredentials {
  return credentials.createSsl(
    Buffer.from(pki.caPem),
    Buffer.from(pki.frontendKeyPem),
    Buffer.from(pki.frontendCertPem),
  );
}

let channelSeq = 0;

/**
 * A TunnelClient. `ownConnection` gives it an HTTP/2 connection nobody else shares (grpc-js
 * pools subchannels across clients with equal options unless told not to).
 */
export function tunnelClient(pki: BenchPki, frontendPort: number, ownConnection: boolean): TunnelClient {
  return new TunnelClient(`${LOOPBACK}:${frontendPort}`, frontendCredentials(pki), {
    "grpc.ssl_target_name_override": "localhost",
    ...(ownConnection ? { "grpc.use_local_subchannel_pool": 1, "kgw-bench.channel": ++channelSeq } : {}),
  });
}

async function dialGrpc(client: TunnelClient, target: string, onClose: () => void): Promise<Conn> {
  const t0 = now();
  const socket = await client.dial(target, { timeoutMs: DIAL_TIMEOUT_MS });
  socket.on("error", () => {});
  await ping(socket);
  return {
    socket,
    dialMs: now() - t0,
    close: () => {
      socket.destroy();
      onClose();
    },
  };
}

/** One stream per tunnel on a channel shared by every dial of this opener. */
export function grpcSharedOpener(client: TunnelClient, target: string): Opener {
  return () => dialGrpc(client, target, () => {});
}

/**
 * One stream per tunnel on a shared channel, replaced by a fresh one (connected in the
 * background before the switch) every `perChannel` dials. Needed because Node's HTTP/2 server
 * (nghttp2's rapid-reset mitigation) ends a session with GOAWAY(INTERNAL_ERROR) once its client
 * has reset about 1,000 streams faster than ~33/s, and TunnelClient resets the stream of every
 * tunnel it closes; see docs/PERFORMANCE.md. Applied alike to ours and upstream.
 */
export function grpcRotatingOpener(
  pki: BenchPki,
  frontendPort: number,
  target: string,
  perChannel = 500,
): { open: Opener; close(): void } {
  const clients: TunnelClient[] = [];
  const fresh = () => {
    const c = tunnelClient(pki, frontendPort, true);
    clients.push(c);
    return c;
  };
  let current = fresh();
  let used = 0;
  let rotating = false;
  const rotate = async () => {
    const next = fresh();
    try {
      // An untimed dial connects the new channel, so no timed dial pays for its TLS handshake.
      (await dialGrpc(next, target, () => {})).close();
    } catch {
      // The dials on the new channel will report it.
    }
    current = next;
    used = 0;
    rotating = false;
  };
  return {
    open: () => {
      used++;
      if (used >= perChannel * 0.8 && !rotating) {
        rotating = true;
        void rotate();
      }
      return dialGrpc(current, target, () => {});
    },
    close: () => {
      for (const c of clients) c.close();
    },
  };
}

/** One channel (HTTP/2 connection) per tunnel, as upstream's konnectivity-client does. */
export function grpcOwnChannelOpener(pki: BenchPki, frontendPort: number, target: string): Opener {
  return async () => {
    const client = tunnelClient(pki, frontendPort, true);
    try {
      return await dialGrpc(client, target, () => client.close());
    } catch (err) {
      client.close();
      throw err;
    }
  };
}
