import { describe, expect, it } from "vitest";
import {
  canonicalRule,
  DEFAULT_EGRESS_POLICY,
  type EgressPolicy,
  EgressRuleError,
  MAX_EGRESS_RULES,
  validateEgressPolicy,
} from "../../lib/egress/egress-policy.js";
import { EgressCache, egressWireText, MAX_EGRESS_WIRE_BYTES } from "../../lib/egress/egress-wire.js";
import { compileEgressPolicy } from "../../lib/egress/judge.js";

// Pure functions on strings: nothing here resolves a name, opens a socket or sends a packet.
const policy = (allow: string[], flags: Partial<EgressPolicy> = {}): EgressPolicy =>
  validateEgressPolicy({ allow, allowLoopback: false, allowLinkLocal: false, ...flags });
const judge = (p: EgressPolicy) => compileEgressPolicy(p);

describe("egress rules as an operator writes them", () => {
  it.each([
    ["10.0.0.0/8", "10.0.0.0/8"],
    ["10.1.2.3", "10.1.2.3/32"],
    ["10.0.0.0/8:443", "10.0.0.0/8:443"],
    ["10.0.0.0/8:443,10250,30000-32767", "10.0.0.0/8:443,10250,30000-32767"],
    ["FD00::/8", "fd00::/8"],
    ["[fd00::/8]:443", "[fd00::/8]:443"],
    ["fd00::1", "fd00::1/128"],
    ["*", "*"],
    ["*:443", "*:443"],
    ["Kubelet.Example.COM:10250", "kubelet.example.com:10250"],
    ["*.svc.cluster.local.:443", "*.svc.cluster.local:443"],
    ["443-443.example", "443-443.example"],
  ])("%s reads as %s", (text, canonical) => {
    expect(canonicalRule(text)).toBe(canonical);
    expect(canonicalRule(canonical)).toBe(canonical);
  });

  it.each([
    ["", "empty"],
    ["10.0.0.0/33", "prefix length"],
    ["10.0.0.0/-1", "prefix length"],
    ["fd00::/129", "prefix length"],
    ["10.0.0.0/8:0", "bad port range"],
    ["10.0.0.0/8:65536", "bad port range"],
    ["10.0.0.0/8:2-1", "bad port range"],
    ["10.0.0.0/8:", "bad port"],
    ["10.0.0.0/8:http", "bad port"],
    ["10.0.0.0/8:443,", "bad port"],
    ["[10.0.0.0/8]:443", "IPv6 only"],
    ["[fd00::/8]443", "expected :ports"],
    ["[fd00::/8", "missing ]"],
    ["fe80::1%eth0", "zone"],
    ["example.com/24", "not an IP network"],
    ["a.*.example.com", "not a host name"],
    ["*example.com", "not a host name"],
    ["-bad.example", "not a host name"],
    ["exa mple.com", "whitespace"],
    ["example.com\n:443", "whitespace"],
    ["ex\u0000ample", "control"],
    [`${"a".repeat(64)}.com`, "not a host name"],
    ["x".repeat(301), "longer than"],
    [`10.0.0.0/8:${Array.from({ length: 33 }, (_, i) => i + 1).join(",")}`, "more than 32 port items"],
  ])("refuses %j (%s)", (text, why) => {
    expect(() => canonicalRule(text)).toThrow(EgressRuleError);
    expect(() => canonicalRule(text)).toThrow(why);
  });

  it("a policy is checked whole: too many rules, non-strings, non-booleans; duplicates collapse", () => {
    const many = Array.from({ length: MAX_EGRESS_RULES + 1 }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`);
    expect(() => policy(many)).toThrow(`more than ${MAX_EGRESS_RULES} rules`);
    expect(() => validateEgressPolicy({ allow: [1] } as unknown as EgressPolicy)).toThrow(EgressRuleError);
    expect(() =>
      validateEgressPolicy({
        allow: [],
        allowLoopback: "yes",
        allowLinkLocal: false,
      } as unknown as EgressPolicy),
    ).toThrow("booleans");
    expect(policy(["10.1.2.3", "10.1.2.3/32", "*"]).allow).toEqual(["10.1.2.3/32", "*"]);
  });
});

describe("judging a dial target (the server, before forwarding)", () => {
  const p = judge(
    policy(["10.0.0.0/8:443,10250", "[fd00::/8]:443", "*.svc.cluster.local:443", "api.example.com"]),
  );

  it.each([
    ["10.1.2.3", 443],
    ["10.255.0.1", 10250],
    ["fd00::5", 443],
    ["::ffff:10.1.2.3", 443], // IPv4-mapped: the kernel connects to the IPv4 address
    ["webhook.default.svc.cluster.local", 443],
    ["WEBHOOK.default.svc.cluster.local.", 443],
    ["api.example.com", 1],
    ["api.example.com", 65535],
  ])("allows %s:%d", (host, port) => {
    expect(p.judgeTarget(host, port)).toEqual({ allowed: true });
  });

  it.each([
    ["10.1.2.3", 80, "no_rule"],
    ["11.0.0.1", 443, "no_rule"],
    ["fc00::1", 443, "no_rule"],
    ["svc.cluster.local", 443, "no_rule"], // *.x is names under x, not x itself
    ["evilsvc.cluster.local", 443, "no_rule"],
    ["webhook.default.svc.cluster.local", 80, "no_rule"],
    ["other.example.com", 443, "no_rule"],
    ["127.0.0.1", 443, "loopback"],
    ["0.0.0.0", 443, "loopback"],
    ["::1", 443, "loopback"],
    ["::", 443, "loopback"],
    ["::ffff:127.0.0.1", 443, "loopback"],
    ["localhost", 443, "loopback"],
    ["foo.localhost", 443, "loopback"],
    ["169.254.169.254", 80, "link_local"],
    ["fd00:ec2::254", 80, "link_local"],
    ["fe80::1", 443, "link_local"],
  ])("refuses %s:%d (%s)", (host, port, rule) => {
    const v = p.judgeTarget(host, port);
    expect(v).toMatchObject({ allowed: false, rule });
    if (!v.allowed) expect(v.reason).toContain("egress policy");
  });

  it("loopback and link-local stay refused under a rule that covers them, unless allowed by flag", () => {
    const wide = policy(["0.0.0.0/0", "::/0", "*"]);
    expect(judge(wide).judgeTarget("127.0.0.1", 80)).toMatchObject({ rule: "loopback" });
    expect(judge(wide).judgeTarget("169.254.169.254", 80)).toMatchObject({ rule: "link_local" });
    const open = policy(["0.0.0.0/0", "::/0", "*"], { allowLoopback: true, allowLinkLocal: true });
    expect(judge(open).judgeTarget("127.0.0.1", 80)).toEqual({ allowed: true });
    expect(judge(open).judgeTarget("localhost", 80)).toEqual({ allowed: true });
    expect(judge(open).judgeTarget("169.254.169.254", 80)).toEqual({ allowed: true });
    // The flag lifts the class refusal only; a rule must still allow the address.
    const narrow = policy(["10.0.0.0/8"], { allowLoopback: true });
    expect(judge(narrow).judgeTarget("127.0.0.1", 80)).toMatchObject({ rule: "no_rule" });
  });

  it("the default policy allows the cluster and nothing on the agent's host or its cloud", () => {
    const d = judge(DEFAULT_EGRESS_POLICY);
    expect(d.judgeTarget("10.96.0.1", 443)).toEqual({ allowed: true });
    expect(d.judgeTarget("2001:db8::1", 443)).toEqual({ allowed: true });
    expect(d.judgeTarget("kubernetes.default.svc", 443)).toEqual({ allowed: true });
    expect(d.judgeTarget("127.0.0.1", 10250)).toMatchObject({ allowed: false });
    expect(d.judgeTarget("169.254.169.254", 80)).toMatchObject({ allowed: false });
  });

  // What CONNECT refuses on its request line, the judge refuses whatever frontend asked: every
  // spelling a resolver (inet_aton, getaddrinfo) reads as loopback or metadata is judged as that
  // address, never as a name that a `*` rule allows.
  it.each([
    ["localhost.", "loopback"],
    ["foo.localhost.", "loopback"],
    ["LocalHost.", "loopback"],
    ["127.1", "malformed"],
    ["2130706433", "malformed"],
    ["0x7f000001", "malformed"],
    ["0x7f.0.0.1", "malformed"],
    ["0177.0.0.1", "malformed"],
    ["127.0.0.1.", "malformed"],
    ["0251.0376.0251.0376", "malformed"],
    ["169.254.169.254.", "malformed"],
    ["2852039166", "malformed"],
    ["example.127", "malformed"],
    ["0:0:0:0:0:ffff:7f00:1", "loopback"],
    ["::ffff:169.254.169.254", "link_local"],
    ["::127.0.0.1", "malformed"],
    ["fe80::1%eth0", "malformed"],
    ["", "malformed"],
  ])("the default policy refuses %j (%s) under its `*` and /0 rules", (host, rule) => {
    expect(judge(DEFAULT_EGRESS_POLICY).judgeTarget(host, 80)).toMatchObject({ allowed: false, rule });
  });

  it("names an address spelt another way in the reason", () => {
    const v = judge(DEFAULT_EGRESS_POLICY).judgeTarget("0x7f000001", 80);
    expect(v).toMatchObject({ allowed: false, reason: expect.stringContaining("127.0.0.1") });
  });

  it("an empty policy allows nothing", () => {
    expect(judge(policy([])).judgeTarget("10.0.0.1", 443)).toMatchObject({ rule: "no_rule" });
    expect(judge(policy([])).judgeTarget("a.example", 443)).toMatchObject({ rule: "no_rule" });
  });
});

describe("judging resolved addresses (our agent, after name resolution)", () => {
  it("a name that resolves to metadata or loopback is refused: DNS rebinding", () => {
    const d = judge(DEFAULT_EGRESS_POLICY);
    expect(d.judgeTarget("rebind.example", 80)).toEqual({ allowed: true });
    const v = d.judgeAddress("rebind.example", 80, "169.254.169.254");
    expect(v).toMatchObject({ allowed: false, rule: "link_local" });
    if (!v.allowed) expect(v.reason).toContain("rebind.example resolves to 169.254.169.254");
    expect(d.judgeAddress("rebind.example", 80, "127.0.0.1")).toMatchObject({ rule: "loopback" });
    expect(d.judgeAddress("rebind.example", 80, "::ffff:169.254.169.254")).toMatchObject({
      rule: "link_local",
    });
    expect(d.judgeAddress("rebind.example", 80, "10.0.0.1")).toEqual({ allowed: true });
  });

  it("when the policy lists CIDRs, a name's addresses must fall inside one (with the port)", () => {
    const p = judge(policy(["10.0.0.0/8:443", "*.svc.cluster.local:443"]));
    expect(p.judgeAddress("a.svc.cluster.local", 443, "10.1.1.1")).toEqual({ allowed: true });
    expect(p.judgeAddress("a.svc.cluster.local", 443, "192.168.1.1")).toMatchObject({ rule: "no_rule" });
    // Names only: addresses are judged by class alone.
    const names = judge(policy(["*.svc.cluster.local:443"]));
    expect(names.judgeAddress("a.svc.cluster.local", 443, "192.168.1.1")).toEqual({ allowed: true });
    expect(names.judgeAddress("a.svc.cluster.local", 443, "169.254.169.254")).toMatchObject({
      rule: "link_local",
    });
  });
});

describe("the policy on the wire", () => {
  it("round-trips, and a steady policy is compiled once", () => {
    const p = policy(["10.0.0.0/8:443", "*"]);
    const text = egressWireText(p);
    expect(egressWireText(p)).toBe(text);
    const cache = new EgressCache(2);
    const a = cache.get(text);
    expect(a.policy).toEqual(p);
    expect(cache.get(text)).toBe(a);
    cache.get(egressWireText(policy(["*"])));
    cache.get(egressWireText(policy(["10.0.0.0/8"])));
    expect(cache.get(text)).not.toBe(a); // evicted after two others
  });

  it.each([
    ["not JSON", "{", "not JSON"],
    ["an array", "[]", "not an object"],
    ["null", "null", "not an object"],
    [
      "a bad rule",
      JSON.stringify({ allow: ["10.0.0.0/99"], allowLoopback: false, allowLinkLocal: false }),
      "prefix",
    ],
    ["missing flags", JSON.stringify({ allow: [] }), "booleans"],
    ["oversized", JSON.stringify({ allow: ["x".repeat(MAX_EGRESS_WIRE_BYTES)] }), "bytes is over"],
  ])("refuses %s as a protocol error", (_name, text, why) => {
    const cache = new EgressCache();
    expect(() => cache.get(text)).toThrow(expect.objectContaining({ code: "ERR_PROTOCOL" }));
    expect(() => cache.get(text)).toThrow(why);
  });
});
