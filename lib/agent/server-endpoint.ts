/**
 * How the agent reaches the proxy server: target, TLS credentials and channel options. Built
 * once at startup (PEM files are read here, so a missing file is a configuration error at boot);
 * every server connection then creates its own channel from it.
 */

import { isIPv6 } from "node:net";
import { type ChannelCredentials, type ChannelOptions, credentials } from "@grpc/grpc-js";
import type { AgentOptions } from "../config/agent-options.js";
import { readPem } from "../transport/tls-files.js";

/**
 * HTTP/2 receive window per stream and per connection. The default (64 KiB) caps a stream at
 * 64 KiB per round trip, about 1.3 MB/s over a 50ms WAN link; 4 MiB allows ~80 MB/s there.
 * Memory stays bounded: one agent has one stream per server connection, and a window is the
 * most the server can have in flight towards us before we read.
 */
export const AGENT_FLOW_CONTROL_WINDOW = 4 * 1024 * 1024;

export interface ServerEndpoint {
  /** "host:port" as grpc-js takes it (IPv6 literals bracketed). */
  target: string;
  credentials: ChannelCredentials;
  channelOptions: ChannelOptions;
}

export function joinHostPort(host: string, port: number): string {
  return isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

export function serverEndpoint(opts: Pick<AgentOptions, "server" | "tls">): ServerEndpoint {
  const { server, tls } = opts;
  const ca = tls.caCert ? readPem(tls.caCert, "--ca-cert") : null;
  const key = tls.agentKey ? readPem(tls.agentKey, "--agent-key") : null;
  const cert = tls.agentCert ? readPem(tls.agentCert, "--agent-cert") : null;

  const channelOptions: ChannelOptions = {
    // Each server connection gets its own TCP connection: through a load balancer, N channels
    // must be able to reach N different servers, which a shared subchannel would prevent.
    "grpc.use_local_subchannel_pool": 1,
    "grpc-node.flow_control_window": AGENT_FLOW_CONTROL_WINDOW,
    // The tunnel stream is long-lived and stateful; replaying it transparently makes no sense.
    "grpc.enable_retries": 0,
  };
  if (server.keepaliveMs > 0) {
    channelOptions["grpc.keepalive_time_ms"] = server.keepaliveMs;
    channelOptions["grpc.keepalive_permit_without_calls"] = 1;
  }
  if (server.serverName !== server.host) channelOptions["grpc.ssl_target_name_override"] = server.serverName;

  return {
    target: joinHostPort(server.host, server.port),
    credentials: credentials.createSsl(ca, key, cert),
    channelOptions,
  };
}
