/**
 * Judging a dial against a tenant's egress policy (lib/egress/egress-policy.ts), in two steps:
 *
 *  - `judgeTarget(host, port)`: what the caller asked for, before anything is forwarded. The
 *    server runs it for every dial (so a refused dial never reaches an agent, ours or
 *    upstream's), and our agent again when the dial arrives. The host is read by target.ts,
 *    the one parser of every frontend; a spelling it refuses is refused here as `malformed`.
 *  - `judgeAddress(host, port, address)`: each address the agent resolved the host to, before it
 *    connects. Only our agent can run it: upstream's proxy-agent resolves and connects in one
 *    step, so with it a name is judged by its host rule alone.
 *
 * A compiled policy is immutable; compile once per policy (`compileEgressPolicy` caches by the
 * policy object, and `EgressCache` on the agent by the text that came over the wire).
 */
import { BlockList, isIP } from "node:net";
import { type AddressClass, classifyAddress } from "./address-classes.js";
import { type EgressPolicy, type EgressRule, type PortRange, parseRule } from "./egress-policy.js";
import { parseTargetHost } from "./target.js";

export type EgressVerdict =
  | { allowed: true }
  /** `rule` labels metrics and audit records; `reason` is for the caller and the log. */
  | { allowed: false; rule: "loopback" | "link_local" | "no_rule" | "malformed"; reason: string };

const ALLOWED: EgressVerdict = { allowed: true };

interface CidrRule {
  list: BlockList;
  ports: readonly PortRange[];
}

interface HostRule {
  /** "*" every name; "*.x" names under x (not x itself); else the exact name. */
  pattern: string;
  ports: readonly PortRange[];
}

export interface CompiledEgress {
  readonly policy: EgressPolicy;
  judgeTarget(host: string, port: number): EgressVerdict;
  judgeAddress(host: string, port: number, address: string): EgressVerdict;
}

const portAllowed = (ports: readonly PortRange[], port: number) =>
  ports.length === 0 || ports.some(([l, h]) => port >= l && port <= h);

function hostMatches(pattern: string, name: string): boolean {
  if (pattern === "*") return true;
  if (pattern.startsWith("*.")) return name.endsWith(pattern.slice(1)) && name.length > pattern.length - 1;
  return name === pattern;
}

const compiled = new WeakMap<EgressPolicy, CompiledEgress>();

export function compileEgressPolicy(policy: EgressPolicy): CompiledEgress {
  const hit = compiled.get(policy);
  if (hit) return hit;
  const cidrs: CidrRule[] = [];
  const hosts: HostRule[] = [];
  for (const text of policy.allow) {
    const rule: EgressRule = parseRule(text);
    if (rule.kind === "host") {
      hosts.push({ pattern: rule.pattern, ports: rule.ports });
    } else {
      const list = new BlockList();
      list.addSubnet(rule.network, rule.prefix, rule.family);
      cidrs.push({ list, ports: rule.ports });
    }
  }

  const classAllowed = (cls: AddressClass) =>
    cls === "loopback" ? policy.allowLoopback : policy.allowLinkLocal;
  const flagFor = (cls: AddressClass) => (cls === "loopback" ? "loopback" : "link-local");

  /** The class check every address goes through, whatever the rules say. */
  const judgeClass = (subject: string, address: string): EgressVerdict | null => {
    const c = classifyAddress(address);
    if (c === null || classAllowed(c.cls)) return null;
    return {
      allowed: false,
      rule: c.cls === "loopback" ? "loopback" : "link_local",
      reason: `${subject} is ${c.what}; the tenant's egress policy does not allow ${flagFor(c.cls)} destinations`,
    };
  };

  const inCidrs = (address: string, port: number) => {
    const family = isIP(address) === 4 ? "ipv4" : "ipv6";
    return cidrs.some((r) => portAllowed(r.ports, port) && r.list.check(address, family));
  };

  const noRule = (what: string): EgressVerdict => ({
    allowed: false,
    rule: "no_rule",
    reason: `no rule of the tenant's egress policy allows ${what}`,
  });

  const result: CompiledEgress = {
    policy,
    judgeTarget(host, port) {
      // The one reading of a target every frontend shares (target.ts): an address in any
      // spelling a resolver takes is judged as that address, never as a name.
      const parsed = parseTargetHost(host);
      if (!parsed.ok) return { allowed: false, rule: "malformed", reason: parsed.reason };
      const target = parsed.value;
      if (target.kind !== "name") {
        const address = target.address;
        const refused = judgeClass(address, address);
        if (refused) return refused;
        return inCidrs(address, port) ? ALLOWED : noRule(formatTarget(address, port));
      }
      const name = target.name;
      // Names that mean this host on every resolver, whatever DNS says (RFC 6761).
      if ((name === "localhost" || name.endsWith(".localhost")) && !policy.allowLoopback) {
        return {
          allowed: false,
          rule: "loopback",
          reason: `${name} is loopback; the tenant's egress policy does not allow loopback destinations`,
        };
      }
      return hosts.some((r) => portAllowed(r.ports, port) && hostMatches(r.pattern, name))
        ? ALLOWED
        : noRule(formatTarget(name, port));
    },
    judgeAddress(host, port, address) {
      const literal = isIP(host) !== 0;
      const subject = literal ? address : `${host} resolves to ${address}, which`;
      const refused = judgeClass(subject, address);
      if (refused) return refused;
      if (literal || cidrs.length === 0) return ALLOWED;
      return inCidrs(address, port) ? ALLOWED : noRule(`${host} (${formatTarget(address, port)})`);
    },
  };
  compiled.set(policy, result);
  return result;
}

function formatTarget(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}
