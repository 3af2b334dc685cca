/**
 * How the agent reaches a backend: a DIAL_REQ's protocol and address become something
 * `net.connect` takes, or the error text the agent answers with. Error texts follow Go's
 * `net.Dial` wording, which upstream agents send and operators already recognise in logs.
 */
import { connect, type Socket } from "node:net";
import { BACKEND_TCP_KEEPALIVE_MS } from "./durations.js";
import { pinnedLookup, type ResolvedAddress } from "./host-resolver.js";

export interface TcpTarget {
  host: string;
  port: number;
}

export type DialTargetResult = { ok: true; target: TcpTarget } | { ok: false; error: string };

/**
 * Only "tcp" is served: it is what every Konnectivity client sends, and refusing the rest keeps
 * the agent from becoming a UDP or Unix-socket relay nobody asked for.
 */
export function parseDialTarget(protocol: string, address: string): DialTargetResult {
  if (protocol !== "tcp")
    return { ok: false, error: `dial ${protocol} ${address}: unknown network ${protocol}` };
  const fail = (why: string): DialTargetResult => ({
    ok: false,
    error: `dial tcp ${address}: address ${why}`,
  });

  let host: string;
  let portText: string;
  if (address.startsWith("[")) {
    // "[v6addr]:port", as Go's net.JoinHostPort writes IPv6 literals.
    const close = address.indexOf("]");
    if (close === -1) return fail("missing ']'");
    if (address[close + 1] !== ":") return fail("missing port");
    host = address.slice(1, close);
    portText = address.slice(close + 2);
  } else {
    const colon = address.lastIndexOf(":");
    if (colon === -1) return fail("missing port");
    host = address.slice(0, colon);
    portText = address.slice(colon + 1);
    if (host.includes(":")) return fail("too many colons");
  }
  // Go also resolves service names ("http"); no Konnectivity client sends them.
  if (!/^\d{1,5}$/.test(portText)) return fail(`invalid port "${portText}"`);
  const port = Number(portText);
  if (port < 1 || port > 65_535) return fail(`invalid port "${portText}"`);
  // An empty host means the local system in Go; be explicit so Node does the same.
  return { ok: true, target: { host: host === "" ? "localhost" : host, port } };
}

/** A target whose host was resolved, and whose addresses the destination policy allowed. */
export interface ResolvedTarget extends TcpTarget {
  addresses: readonly ResolvedAddress[];
}

/** Opens a TCP connection; injectable so tests can simulate dials that never complete. */
export type SocketFactory = (target: ResolvedTarget) => Socket;

export const defaultSocketFactory: SocketFactory = ({ host, port, addresses }) =>
  connect({
    host,
    port,
    // Only the addresses the policy saw: no second lookup that could answer differently.
    lookup: pinnedLookup(addresses),
    // Go's dialer, which upstream uses, sets TCP_NODELAY and a 15s keepalive by default.
    noDelay: true,
    keepAlive: true,
    keepAliveInitialDelay: BACKEND_TCP_KEEPALIVE_MS,
  });
