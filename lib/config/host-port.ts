import { isIP } from "node:net";

/** "host:port" or "[v6]:port" → its parts; undefined for anything else. */
export function splitHostPort(address: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(address);
  if (!m) return undefined;
  const host = m[1] ?? m[2]!;
  const port = Number(m[3]);
  if (port < 1 || port > 65_535) return undefined;
  if (m[1] !== undefined && isIP(host) !== 6) return undefined;
  return { host, port };
}
