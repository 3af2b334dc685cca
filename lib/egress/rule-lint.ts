/**
 * Rules of an egress policy that can never decide a dial, found when the operator writes the
 * policy (`kgw tenant policy --set`), not when a tenant's dial is refused for it:
 *
 *  - a network wholly inside loopback, "this host" or link-local / cloud metadata
 *    (address-classes.ts) while the policy does not allow that class: the class check refuses
 *    every address in it before any rule is read (judge.ts);
 *  - a `localhost` name (RFC 6761) without --allow-loopback, refused the same way;
 *  - a rule wholly covered by an earlier one (its network or names, and its ports): the earlier
 *    rule already allows everything it would, so removing it changes nothing.
 *
 * Ports outside 1-65535 (port 0 included) are refused by the rule parser already
 * (egress-policy.ts). A warning never changes the policy: the operator may mean it.
 */
import { BlockList } from "node:net";
import { CLASS_RANGES } from "./address-classes.js";
import {
  type EgressPolicy,
  type EgressRule,
  formatRule,
  type PortRange,
  parseRule,
} from "./egress-policy.js";

export interface RuleWarning {
  /** The rule, as the policy stores it. */
  rule: string;
  why: string;
}

type CidrRule = Extract<EgressRule, { kind: "cidr" }>;

/** Whether network `inner` (with its prefix) lies wholly inside `outer`. */
function networkWithin(
  inner: { network: string; prefix: number; family: string },
  outer: { network: string; prefix: number; family: "ipv4" | "ipv6" },
): boolean {
  if (inner.family !== outer.family || inner.prefix < outer.prefix) return false;
  const list = new BlockList();
  list.addSubnet(outer.network, outer.prefix, outer.family);
  return list.check(inner.network, outer.family);
}

/** Whether every port of `inner` is a port of `outer` (no ranges: every port). */
function portsWithin(inner: readonly PortRange[], outer: readonly PortRange[]): boolean {
  if (outer.length === 0) return true;
  if (inner.length === 0) return false;
  return inner.every(([low, high]) => {
    // Walk the outer ranges that overlap, as a union: [1-10] and [11-20] cover 5-15.
    let next = low;
    for (const [l, h] of [...outer].sort((a, b) => a[0] - b[0])) {
      if (l <= next && h >= next) next = h + 1;
      if (next > high) return true;
    }
    return next > high;
  });
}

/** Whether every name `inner` matches, `outer` matches too (judge.ts's hostMatches). */
function patternWithin(inner: string, outer: string): boolean {
  if (outer === "*" || inner === outer) return true;
  if (!outer.startsWith("*.")) return false;
  const suffix = outer.slice(1); // ".x"
  return inner !== "*" && inner.endsWith(suffix) && inner.length > suffix.length;
}

function covers(earlier: EgressRule, rule: EgressRule): boolean {
  if (!portsWithin(rule.ports, earlier.ports)) return false;
  if (earlier.kind === "host" && rule.kind === "host") return patternWithin(rule.pattern, earlier.pattern);
  if (earlier.kind === "cidr" && rule.kind === "cidr") return networkWithin(rule, earlier);
  return false;
}

function classWarning(rule: CidrRule, policy: EgressPolicy): string | undefined {
  for (const range of CLASS_RANGES) {
    if (!networkWithin(rule, range)) continue;
    if (range.cls === "loopback" && !policy.allowLoopback) {
      return `it is ${range.what}, which the policy refuses before any rule unless --allow-loopback is given`;
    }
    if (range.cls === "link-local" && !policy.allowLinkLocal) {
      return `it is ${range.what}, which the policy refuses before any rule unless --allow-link-local is given`;
    }
  }
  return undefined;
}

export function lintEgressPolicy(policy: EgressPolicy): RuleWarning[] {
  const warnings: RuleWarning[] = [];
  const seen: EgressRule[] = [];
  for (const text of policy.allow) {
    const rule = parseRule(text);
    const shown = formatRule(rule);
    let why: string | undefined;
    if (rule.kind === "cidr") why = classWarning(rule, policy);
    else if ((rule.pattern === "localhost" || rule.pattern.endsWith(".localhost")) && !policy.allowLoopback) {
      why =
        "localhost names are loopback, which the policy refuses before any rule unless --allow-loopback is given";
    }
    if (why === undefined) {
      const earlier = seen.find((e) => covers(e, rule));
      if (earlier) why = `the earlier rule ${formatRule(earlier)} already allows everything it does`;
    }
    if (why !== undefined) warnings.push({ rule: shown, why: `never decides a dial: ${why}` });
    seen.push(rule);
  }
  return warnings;
}
