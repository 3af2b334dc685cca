/**
 * How the agent reaches the proxy server: address, TLS credentials, and the settings of both
 * transports. Built once at startup (PEM files are read here, so a missing file is a
 * configuration error at boot); every server connection then opens its own TCP connection.
 */

import { isIP, isIPv6 } from "node:net";
import { checkServerIdentity } from "node:tls";
import { type ChannelOptions, credentials } from "@grpc/grpc-js";
import type { AgentOptions, ServerTransport } from "../config/agent-options.js";
import { WAN_CHANNEL_OPTIONS } from "../transport/http2-windows.js";
import { readPem } from "../transport/tls-files.js";
import type { GrpcTarget } from "./transports/grpc-transport.js";
import type { TunnelTarget } from "./transports/tunnel-transport.js";

/** How long a keepalive ping may go unanswered before the server is declared dead. */
export const SERVER_KEEPALIVE_TIMEOUT_MS = 20_000;

export interface ServerEndpoint {
  /** "auto" offers kgw-tunnel/1 and falls back to gRPC; "grpc" never offers it. */
  transport: ServerTransport;
  grpc: GrpcTarget;
  tunnel: TunnelTarget;
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
    transport: server.transport,
    grpc: {
      target: joinHostPort(server.host, server.port),
      address: { host: server.host, port: server.port },
      credentials: credentials.createSsl(ca, key, cert),
      channelOptions,
    },
    tunnel: {
      tls: {
        host: server.host,
        port: server.port,
        // SNI may not be an IP address; the certificate is checked against the name either way.
        servername: isIP(server.serverName) ? undefined : server.serverName,
        checkServerIdentity: (_host, peerCert) => checkServerIdentity(server.serverName, peerCert),
        ...(ca ? { ca } : {}),
        ...(key && cert ? { key, cert } : {}),
        minVersion: "TLSv1.2",
      },
      keepaliveMs: server.keepaliveMs,
      keepaliveTimeoutMs: SERVER_KEEPALIVE_TIMEOUT_MS,
    },
  };
}
