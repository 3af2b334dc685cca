/**
 * Address classes that are the agent host's own business, never a cluster backend's: its
 * loopback and link-local networks, and the cloud metadata services (instance credentials live
 * there). A tenant's egress policy denies them unless the operator allows them by name
 * (lib/egress/egress-policy.ts), whatever its CIDR rules say, and they are judged on every
 * address a name resolves to, which is what defeats DNS rebinding.
 *
 * BlockList matches IPv4 rules against IPv4-mapped IPv6 (::ffff:127.0.0.1) too, and ignores an
 * IPv6 zone (fe80::1%eth0).
 */
import { BlockList, isIP } from "node:net";

export type AddressClass = "loopback" | "link-local";

interface ClassRule {
  list: BlockList;
  cls: AddressClass;
  what: string;
}

/** One range of a class, as data: the policy lint (rule-lint.ts) reads them too. */
export interface ClassRange {
  readonly network: string;
  readonly prefix: number;
  readonly family: "ipv4" | "ipv6";
  readonly cls: AddressClass;
  /** For people: why an address in the range is in its class. */
  readonly what: string;
}

export const CLASS_RANGES: readonly ClassRange[] = [
  { network: "127.0.0.0", prefix: 8, family: "ipv4", cls: "loopback", what: "loopback" },
  // Connecting to 0.0.0.0 (or ::) reaches the host's own listeners on Linux.
  {
    network: "0.0.0.0",
    prefix: 8,
    family: "ipv4",
    cls: "loopback",
    what: "this host (0.0.0.0/8 reaches the host's own listeners)",
  },
  { network: "::1", prefix: 128, family: "ipv6", cls: "loopback", what: "loopback" },
  {
    network: "::",
    prefix: 128,
    family: "ipv6",
    cls: "loopback",
    what: "this host (:: reaches the host's own listeners)",
  },
  {
    network: "169.254.0.0",
    prefix: 16,
    family: "ipv4",
    cls: "link-local",
    what: "link-local (cloud instance metadata and credentials live there)",
  },
  { network: "fe80::", prefix: 10, family: "ipv6", cls: "link-local", what: "link-local" },
  // Unique-local rather than link-local, but the same metadata services over IPv6.
  {
    network: "fd00:ec2::254",
    prefix: 128,
    family: "ipv6",
    cls: "link-local",
    what: "the AWS instance metadata service",
  },
  {
    network: "fd20:ce::254",
    prefix: 128,
    family: "ipv6",
    cls: "link-local",
    what: "the Google Cloud metadata server",
  },
];

const RULES: readonly ClassRule[] = CLASS_RANGES.map((r) => {
  const list = new BlockList();
  list.addSubnet(r.network, r.prefix, r.family);
  return { list, cls: r.cls, what: r.what };
});

export interface ClassifiedAddress {
  cls: AddressClass;
  /** For people: why the address is in its class. */
  what: string;
}

/** The class of `address` (an IP literal), or null when it is an ordinary address. */
export function classifyAddress(address: string): ClassifiedAddress | null {
  const version = isIP(address);
  // Resolvers return only addresses; net.connect refuses anything else by itself.
  if (version === 0) return null;
  const family = version === 4 ? "ipv4" : "ipv6";
  const hit = RULES.find((r) => r.list.check(address, family));
  return hit ? { cls: hit.cls, what: hit.what } : null;
}
