/**
 * The Node HTTP/2 servers grpc-js creates behind a connection injector, and the transport each
 * of their sessions was made on.
 *
 * grpc-js offers no options for server-side HTTP/2 windows and no hook for sessions, so this
 * reaches into its private server map. If a grpc-js upgrade changes that shape it returns null
 * (the gateway warns, a test fails) instead of breaking the server.
 */
import type { Http2Server, Http2Session } from "node:http2";
import type { Duplex } from "node:stream";
import type { ConnectionInjector, Server as GrpcServer } from "@grpc/grpc-js";

function isHttp2Server(value: unknown): value is Http2Server {
  return typeof (value as Http2Server | null)?.updateSettings === "function";
}

/** The HTTP/2 servers behind `server`'s injectors (one per injector), or null if not found. */
export function http2ServersOf(server: GrpcServer): Http2Server[] | null {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) return null;
  const found = [...servers.keys()].filter(isHttp2Server);
  return found.length > 0 ? found : null;
}

/** Each injected socket carries itself under this key, so its session can find it again. */
const TRANSPORT = Symbol("kgw.transport");

/** Hands `socket` to grpc-js, remembering it as the transport of the session it becomes. */
export function injectTransport(injector: ConnectionInjector, socket: Duplex): void {
  (socket as unknown as Record<symbol, Duplex>)[TRANSPORT] = socket;
  injector.injectConnection(socket);
}

/**
 * The socket `session` was made on, if it came through `injectTransport`. `session.socket` is a
 * proxy that forbids destroying it; the proxy passes property reads through to the socket. A
 * stream without a native handle (a sniffed connection's `PrefixedDuplex`) is wrapped by Node in
 * a JSStreamSocket, which keeps it as `stream`.
 */
export function transportOf(session: Http2Session): Duplex | undefined {
  type Tagged = Record<symbol, Duplex | undefined> & { stream?: Record<symbol, Duplex | undefined> };
  try {
    const socket = session.socket as unknown as Tagged;
    return socket[TRANSPORT] ?? socket.stream?.[TRANSPORT];
  } catch {
    return undefined; // the session has let go of its socket
  }
}
