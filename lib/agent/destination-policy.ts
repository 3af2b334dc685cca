/**
 * Which destinations the agent may connect to. A policy judges each address a dial resolved to,
 * never the name the caller wrote: a name can resolve to anything, and to something else on the
 * next lookup (DNS rebinding), so the BackendDialer resolves once, asks the policy about every
 * address, and connects only to those addresses.
 *
 * A policy is a pure function injected into the dialer. `dropInDestinationPolicy` is what
 * `kgw agent` runs with. A tenant's egress policy (allowed CIDRs and ports, loopback denied by
 * default) is judged at the gateway before a dial is forwarded (lib/egress); the agent's own
 * check after resolution is what catches a name that resolves somewhere it must not go.
 */
import { BlockList, isIP } from "node:net";

export interface Destination {
  /** What the caller asked for: a host name or an address literal. */
  host: string;
  port: number;
  /** One address `host` resolved to (the literal itself for a literal). */
  address: string;
}

export type DestinationVerdict =
  | { allowed: true }
  /** `rule` labels the refusal metric; `reason` ends up in the caller's DIAL_RSP error. */
  | { allowed: false; rule: string; reason: string };

export type DestinationPolicy = (dest: Destination) => DestinationVerdict;

const ALLOWED: DestinationVerdict = { allowed: true };

/**
 * Addresses that are the agent host's own business, never a cluster backend's. BlockList
 * matches IPv4 rules against IPv4-mapped IPv6 (::ffff:169.254.169.254) too, and ignores an
 * IPv6 zone (fe80::1%eth0).
 */
const LINK_LOCAL: ReadonlyArray<{ list: BlockList; what: string }> = [
  rule("169.254.0.0", 16, "ipv4", "link-local (cloud instance metadata and credentials live there)"),
  rule("fe80::", 10, "ipv6", "link-local"),
  // Unique-local rather than link-local, but the same metadata services over IPv6.
  rule("fd00:ec2::254", 128, "ipv6", "the AWS instance metadata service"),
  rule("fd20:ce::254", 128, "ipv6", "the Google Cloud metadata server"),
];

function rule(net: string, prefix: number, family: "ipv4" | "ipv6", what: string) {
  const list = new BlockList();
  list.addSubnet(net, prefix, family);
  return { list, what };
}

/** What makes `address` link-local (or a metadata address), or null when it is neither. */
export function linkLocalKind(address: string): string | null {
  const version = isIP(address);
  // Resolvers return only addresses; net.connect refuses anything else by itself.
  if (version === 0) return null;
  const family = version === 4 ? "ipv4" : "ipv6";
  return LINK_LOCAL.find((r) => r.list.check(address, family))?.what ?? null;
}

/**
 * The drop-in policy: everything the agent can reach except link-local and metadata addresses,
 * unless `allowLinkLocal` (--allow-link-local-destinations). Loopback stays allowed, as upstream
 * allows it; tests and `kgw demo` rely on it. A tenant's egress policy denies it by default, at
 * the gateway.
 */
export function dropInDestinationPolicy(opts: { allowLinkLocal: boolean }): DestinationPolicy {
  if (opts.allowLinkLocal) return () => ALLOWED;
  return ({ host, address }) => {
    const kind = linkLocalKind(address);
    if (kind === null) return ALLOWED;
    const subject = host === address ? address : `${host} resolves to ${address}, which`;
    return {
      allowed: false,
      rule: "link_local",
      reason: `${subject} is ${kind}; the agent refuses it unless started with --allow-link-local-destinations`,
    };
  };
}
