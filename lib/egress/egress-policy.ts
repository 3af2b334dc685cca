/**
 * A tenant's egress policy: where its dials may go. Stored in the tenant record and sent to our
 * agents in the same form, rules as canonical text:
 *
 *   10.0.0.0/8            a CIDR (an address alone is a /32 or /128), any port
 *   10.0.0.0/8:443,10250  the same, those ports only; ranges as 30000-32767
 *   [fd00::/8]:443        IPv6 with ports takes brackets
 *   *.svc.cluster.local:443   host names: exact, or `*.` and a suffix; `*` is every name
 *
 * A dial to an address literal needs a CIDR rule, a dial by name a host rule. Loopback and
 * link-local addresses (cloud metadata among them; lib/egress/address-classes.ts) are refused
 * unless the policy allows them by flag, whatever its CIDRs say, and our agent judges every
 * address a name resolves to as well (DNS rebinding); when the policy lists any CIDR, those
 * addresses must also fall inside one (lib/egress/judge.ts).
 *
 * Parsing is strict and bounded: this text comes from an operator's command line and, on the
 * agent, from the wire.
 */
import { isIP } from "node:net";
import { ConfigError } from "../errors.js";

export interface EgressPolicy {
  /** Canonical rule texts (formatRule ∘ parseRule), in the operator's order. */
  readonly allow: readonly string[];
  /** Let dials reach the agent host's loopback (127.0.0.0/8, ::1, 0.0.0.0). */
  readonly allowLoopback: boolean;
  /** Let dials reach link-local addresses, cloud metadata services included. */
  readonly allowLinkLocal: boolean;
}

/** A new tenant's policy: anything in its cluster, nothing on the agent's host or its cloud. */
export const DEFAULT_EGRESS_POLICY: EgressPolicy = Object.freeze({
  allow: Object.freeze(["0.0.0.0/0", "::/0", "*"]),
  allowLoopback: false,
  allowLinkLocal: false,
});

export const MAX_EGRESS_RULES = 256;
const MAX_RULE_CHARS = 300;
const MAX_PORT_ITEMS = 32;

export type PortRange = readonly [low: number, high: number];

export type EgressRule =
  | { kind: "cidr"; network: string; prefix: number; family: "ipv4" | "ipv6"; ports: readonly PortRange[] }
  /** `suffix` is set for `*.suffix`; `pattern` "*" matches every name. */
  | { kind: "host"; pattern: string; ports: readonly PortRange[] };

/** A rule the operator wrote that is not one: ERR_CONFIG, with the rule quoted. */
export class EgressRuleError extends ConfigError {}

function fail(text: string, why: string): never {
  throw new EgressRuleError(`egress rule ${JSON.stringify(text.slice(0, 80))}: ${why}`);
}

export function parseRule(text: string): EgressRule {
  if (text.length === 0) fail(text, "empty");
  if (text.length > MAX_RULE_CHARS) fail(text, `longer than ${MAX_RULE_CHARS} characters`);
  // Rules are printable ASCII; anything else (whitespace, controls, look-alike letters) is refused.
  if (!/^[\x21-\x7e]+$/.test(text)) fail(text, "contains whitespace, control or non-ASCII characters");
  let target: string;
  let portText: string | null = null;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close < 0) fail(text, "missing ]");
    target = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest !== "") {
      if (!rest.startsWith(":")) fail(text, "expected :ports after ]");
      portText = rest.slice(1);
    }
    if (!target.includes(":")) fail(text, "brackets are for IPv6 only");
  } else {
    const colons = text.split(":").length - 1;
    if (colons > 1) {
      target = text; // bare IPv6: no ports (write [addr/len]:ports for those)
    } else if (colons === 1) {
      const at = text.indexOf(":");
      target = text.slice(0, at);
      portText = text.slice(at + 1);
    } else {
      target = text;
    }
  }
  const ports = portText === null ? [] : parsePorts(text, portText);
  return { ...parseTarget(text, target), ports };
}

function parseTarget(
  text: string,
  target: string,
):
  | { kind: "cidr"; network: string; prefix: number; family: "ipv4" | "ipv6" }
  | { kind: "host"; pattern: string } {
  const slash = target.indexOf("/");
  const address = slash < 0 ? target : target.slice(0, slash);
  const version = isIP(address);
  if (version !== 0) {
    const max = version === 4 ? 32 : 128;
    let prefix = max;
    if (slash >= 0) {
      const p = target.slice(slash + 1);
      if (!/^\d{1,3}$/.test(p) || Number(p) > max) fail(text, `prefix length must be 0-${max}`);
      prefix = Number(p);
    }
    if (address.includes("%")) fail(text, "zone indexes are not allowed");
    return { kind: "cidr", network: address.toLowerCase(), prefix, family: version === 4 ? "ipv4" : "ipv6" };
  }
  if (slash >= 0) fail(text, "not an IP network");
  return { kind: "host", pattern: parseHostPattern(text, target) };
}

const LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function parseHostPattern(text: string, target: string): string {
  const name = target.toLowerCase();
  if (name === "*") return name;
  const bare = name.startsWith("*.") ? name.slice(2) : name;
  if (bare.length === 0 || bare.length > 253) fail(text, "not a host name");
  const labels = (bare.endsWith(".") ? bare.slice(0, -1) : bare).split(".");
  for (const label of labels) {
    if (!LABEL.test(label))
      fail(text, `not a host name (label ${JSON.stringify(label)}); wildcards only as a leading *.`);
  }
  // A trailing dot names the same host; keep one spelling so that rules compare as text.
  return name.endsWith(".") ? name.slice(0, -1) : name;
}

function parsePorts(text: string, portText: string): PortRange[] {
  const items = portText.split(",");
  if (items.length > MAX_PORT_ITEMS) fail(text, `more than ${MAX_PORT_ITEMS} port items`);
  const ranges: PortRange[] = [];
  for (const item of items) {
    const m = /^(\d{1,5})(?:-(\d{1,5}))?$/.exec(item);
    if (!m) fail(text, `bad port ${JSON.stringify(item)}: a port (1-65535) or a range low-high`);
    const low = Number(m[1]);
    const high = m[2] === undefined ? low : Number(m[2]);
    if (low < 1 || high > 65535 || low > high) fail(text, `bad port range ${item}`);
    ranges.push([low, high]);
  }
  return ranges;
}

function formatPorts(ports: readonly PortRange[]): string {
  return ports.map(([l, h]) => (l === h ? `${l}` : `${l}-${h}`)).join(",");
}

export function formatRule(rule: EgressRule): string {
  const ports = rule.ports.length === 0 ? "" : formatPorts(rule.ports);
  if (rule.kind === "host") return ports ? `${rule.pattern}:${ports}` : rule.pattern;
  const net = `${rule.network}/${rule.prefix}`;
  if (rule.family === "ipv6") return ports ? `[${net}]:${ports}` : net;
  return ports ? `${net}:${ports}` : net;
}

/** The canonical text of a rule as an operator wrote it; throws EgressRuleError. */
export function canonicalRule(text: string): string {
  return formatRule(parseRule(text));
}

/**
 * Checks a whole policy (from a record, a command line or the wire) and returns it in canonical
 * form; throws EgressRuleError.
 */
export function validateEgressPolicy(policy: EgressPolicy): EgressPolicy {
  if (!Array.isArray(policy.allow)) throw new EgressRuleError("egress policy: allow must be a list");
  if (policy.allow.length > MAX_EGRESS_RULES)
    throw new EgressRuleError(`egress policy: more than ${MAX_EGRESS_RULES} rules`);
  if (typeof policy.allowLoopback !== "boolean" || typeof policy.allowLinkLocal !== "boolean")
    throw new EgressRuleError("egress policy: allowLoopback and allowLinkLocal must be booleans");
  const allow: string[] = [];
  for (const r of policy.allow) {
    if (typeof r !== "string") throw new EgressRuleError("egress policy: every rule must be a string");
    const c = canonicalRule(r);
    if (!allow.includes(c)) allow.push(c);
  }
  return { allow, allowLoopback: policy.allowLoopback, allowLinkLocal: policy.allowLinkLocal };
}
