/**
 * HTTP/2 flow-control windows sized for WAN round trips.
 *
 * With the 64 KiB default, one HTTP/2 stream moves at most 64 KiB per round trip: about 3 MB/s
 * over a 20 ms link, whatever the bandwidth. An agent stream carries every connection of that
 * agent, so its window bounds their sum. grpc-js sets client windows from the
 * `grpc-node.flow_control_window` channel option but leaves server sessions at the default, so
 * the server's per-stream window is raised here.
 *
 * The server's connection-level window is deliberately left at the default: raised with
 * `session.setLocalWindowSize`, Node's HTTP/2 session sometimes never saw a killed peer (a native
 * write fails with EPIPE, the session is not destroyed and stops reading; docs/DESIGN.md), so its
 * tunnels stayed open until keepalive. Our own agents no longer ride HTTP/2 (kgw-tunnel/1); this
 * window still bounds upstream agents over WAN and gRPC callers' uploads (docs/PERFORMANCE.md).
 */
import type { Http2Server } from "node:http2";
import type { Server as GrpcServer } from "@grpc/grpc-js";

/** Per-stream window: 16 MiB per 20 ms RTT ≈ 800 MB/s for one agent stream. */
export const HTTP2_STREAM_WINDOW_BYTES = 16 * 1024 * 1024;

/** Channel options for our gRPC clients (agent, tunnel client). */
export const WAN_CHANNEL_OPTIONS = { "grpc-node.flow_control_window": HTTP2_STREAM_WINDOW_BYTES } as const;

function isHttp2Server(value: unknown): value is Http2Server {
  return typeof (value as Http2Server | null)?.updateSettings === "function";
}

/**
 * Raises the windows of every HTTP/2 server grpc-js created for `server` (one per injector).
 * grpc-js offers no option for this, so it reaches into its server map; if a grpc-js upgrade
 * changes that shape, this returns false (and a test fails) instead of breaking the server.
 */
export function raiseServerWindows(server: GrpcServer): boolean {
  const servers = (server as unknown as { http2Servers?: unknown }).http2Servers;
  if (!(servers instanceof Map)) return false;
  let raised = false;
  for (const h2 of servers.keys()) {
    if (!isHttp2Server(h2)) continue;
    h2.updateSettings({ initialWindowSize: HTTP2_STREAM_WINDOW_BYTES });
    raised = true;
  }
  return raised;
}
