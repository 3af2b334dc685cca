/**
 * The gateway's public address as kube-apiserver dials it: `host:port`, host a DNS name or an IP
 * literal (IPv6 in brackets). kube-apiserver verifies the gateway's serving certificate against
 * this host, so it must be a name or address the certificate lists.
 */
import { isIP } from "node:net";

export interface GatewayAddress {
  readonly host: string;
  readonly port: number;
  /** `https://host:port` (IPv6 bracketed), the egress configuration's `url`. */
  readonly url: string;
}

/** Host names: RFC 1123 labels, ASCII only (an internationalized name goes in as punycode). */
const DNS_NAME =
  /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

/** Parses `host:port`; returns a reason instead of throwing so the caller words the error. */
export function parseGatewayAddress(text: string): GatewayAddress | { error: string } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  if (!m) return { error: "expected host:port (an IPv6 address in brackets: [2001:db8::1]:8132)" };
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return { error: `port ${m[3]} is outside 1-65535` };
  if (m[1] !== undefined) {
    if (isIP(m[1]) !== 6) return { error: `"${m[1].slice(0, 64)}" in brackets is not an IPv6 address` };
    return { host: m[1], port, url: `https://[${m[1]}]:${port}` };
  }
  const host = m[2]!;
  if (isIP(host) !== 4 && !DNS_NAME.test(host))
    return { error: "the host is not a DNS name or an IPv4 address" };
  return { host, port, url: `https://${host}:${port}` };
}
