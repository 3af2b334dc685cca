/**
 * Name resolution for backend dials, done by the dialer itself rather than inside net.connect,
 * so that the destination policy sees the addresses before any connect, and the connect uses
 * exactly those addresses (a second lookup could answer differently: DNS rebinding).
 */
import { ADDRCONFIG, type LookupAddress } from "node:dns";
import { lookup } from "node:dns/promises";
import type { LookupFunction } from "node:net";

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name or literal to its addresses; injectable so tests never touch DNS. */
export type HostResolver = (host: string) => Promise<ResolvedAddress[]>;

/**
 * What net.connect would have done: getaddrinfo through dns.lookup with the same hints (no IPv6
 * answers on a host without IPv6), every address in the resolver's order, so /etc/hosts and the
 * cluster's search domains work as before. A literal comes back as itself without a query.
 */
export const systemResolver: HostResolver = async (host) =>
  (await lookup(host, { all: true, hints: ADDRCONFIG })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/**
 * A `lookup` for net.connect that answers with addresses resolved (and checked) before. Node
 * asks for all of them when it races address families (autoSelectFamily, on by default), for
 * the first otherwise. Answers on the next tick, as dns.lookup does.
 */
export function pinnedLookup(addresses: readonly ResolvedAddress[]): LookupFunction {
  return (hostname, options, callback) => {
    const first = addresses[0];
    process.nextTick(() => {
      if (!first) {
        const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
        err.code = "ENOTFOUND";
        callback(err, "", 0);
      } else if (options.all) {
        callback(
          null,
          addresses.map((a): LookupAddress => ({ address: a.address, family: a.family })),
        );
      } else {
        callback(null, first.address, first.family);
      }
    });
  };
}
