/**
 * How the agent reaches the proxy server: address, TLS credentials, and the settings of both
 * transports. Built once at startup (PEM files are read here, so a missing file is a
 * configuration error at boot); every server connection then opens its own TCP connection.
 */

import { isIP, isIPv6 } from "node:net";
import { checkServerIdentity } from "node:tls";
import { type ChannelOptions, credentials } from "@grpc/grpc-js";
import type { AgentOptions, ServerTransport } from "../config/agent-options.js";
import { WAN_CHANNEL_OPTIONS } from "../transport/grpc/windows.js";
import { readPem } from "../transport/tls-files.js";
import { SERVER_PING_AFTER_SILENCE_MS, SERVER_PING_TIMEOUT_MS } from "./durations.js";
import type { GrpcTarget } from "./transports/grpc-transport.js";
import type { TunnelTarget } from "./transports/tunnel-transport.js";

export interface ServerEndpoint {
  /** "auto" offers kgw-tunnel/1 and falls back to gRPC; "grpc" never offers it. */
  transport: ServerTransport;
  grpc: GrpcTarget;
  /**
   * The same, for a server known to be ours: HTTP/2 PINGs for liveness (SERVER_PING_* in
   * durations.ts). Never sent to a server not known to be ours: upstream's (grpc-go) answers a
   * client that pings more often than every 30 s with GOAWAY too_many_pings, which ends the stream.
   */
  grpcOurs: GrpcTarget;
  tunnel: TunnelTarget;
}

/** HTTP/2 PINGs every SERVER_PING_AFTER_SILENCE_MS; grpc-js drops the connection on no answer. */
const LIVENESS_CHANNEL_OPTIONS: ChannelOptions = {
  "grpc.keepalive_time_ms": SERVER_PING_AFTER_SILENCE_MS,
  "grpc.keepalive_timeout_ms": SERVER_PING_TIMEOUT_MS,
  "grpc.keepalive_permit_without_calls": 1,
};

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
    // WAN-sized HTTP/2 windows (lib/transport/grpc/windows.ts); the agent stream carries every
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

  const grpc: GrpcTarget = {
    target: joinHostPort(server.host, server.port),
    address: { host: server.host, port: server.port },
    credentials: credentials.createSsl(ca, key, cert),
    channelOptions,
  };
  return {
    transport: server.transport,
    grpc,
    grpcOurs: { ...grpc, channelOptions: { ...channelOptions, ...LIVENESS_CHANNEL_OPTIONS } },
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
      // kgw-tunnel/1 is only ever ours: its own PING keeps the liveness check on, whatever
      // --keepalive-time says (that flag is for upstream's servers, which limit pings).
      keepaliveMs: SERVER_PING_AFTER_SILENCE_MS,
      keepaliveTimeoutMs: SERVER_PING_TIMEOUT_MS,
    },
  };
}
