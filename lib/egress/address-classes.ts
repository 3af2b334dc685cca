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

function rule(
  net: string,
  prefix: number,
  family: "ipv4" | "ipv6",
  cls: AddressClass,
  what: string,
): ClassRule {
  const list = new BlockList();
  list.addSubnet(net, prefix, family);
  return { list, cls, what };
}

const RULES: readonly ClassRule[] = [
  rule("127.0.0.0", 8, "ipv4", "loopback", "loopback"),
  // Connecting to 0.0.0.0 (or ::) reaches the host's own listeners on Linux.
  rule("0.0.0.0", 8, "ipv4", "loopback", "this host (0.0.0.0/8 reaches the host's own listeners)"),
  rule("::1", 128, "ipv6", "loopback", "loopback"),
  rule("::", 128, "ipv6", "loopback", "this host (:: reaches the host's own listeners)"),
  rule(
    "169.254.0.0",
    16,
    "ipv4",
    "link-local",
    "link-local (cloud instance metadata and credentials live there)",
  ),
  rule("fe80::", 10, "ipv6", "link-local", "link-local"),
  // Unique-local rather than link-local, but the same metadata services over IPv6.
  rule("fd00:ec2::254", 128, "ipv6", "link-local", "the AWS instance metadata service"),
  rule("fd20:ce::254", 128, "ipv6", "link-local", "the Google Cloud metadata server"),
];

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
