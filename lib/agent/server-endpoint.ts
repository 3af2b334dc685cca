/**
 * How the agent reaches the proxy server: target, TLS credentials and channel options. Built
 * once at startup (PEM files are read here, so a missing file is a configuration error at boot);
 * every server connection then creates its own channel from it.
 */

import { isIPv6 } from "node:net";
import { type ChannelCredentials, type ChannelOptions, credentials } from "@grpc/grpc-js";
import type { AgentOptions } from "../config/agent-options.js";
import { WAN_CHANNEL_OPTIONS } from "../transport/http2-windows.js";
import { readPem } from "../transport/tls-files.js";

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
    // WAN-sized HTTP/2 windows (lib/transport/http2-windows.ts); the agent stream carries every
    // connection of this agent. Bounded: it is the most the server can have in flight to us.
    ...WAN_CHANNEL_OPTIONS,
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
