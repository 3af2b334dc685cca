/**
 * Rules an operator writes that can never decide a dial (lib/egress/rule-lint.ts), each checked
 * against the judge itself: a rule the lint flags allows nothing the policy without it refuses.
 */
import { describe, expect, it } from "vitest";
import { type EgressPolicy, validateEgressPolicy } from "../../lib/egress/egress-policy.js";
import { compileEgressPolicy } from "../../lib/egress/judge.js";
import { lintEgressPolicy } from "../../lib/egress/rule-lint.js";

const policy = (allow: string[], flags: Partial<EgressPolicy> = {}): EgressPolicy =>
  validateEgressPolicy({ allow, allowLoopback: false, allowLinkLocal: false, ...flags });

const flagged = (p: EgressPolicy) => lintEgressPolicy(p).map((w) => w.rule);

describe("kgw tenant policy's lint", () => {
  it("flags loopback, this-host and localhost rules without --allow-loopback, and not with it", () => {
    const rules = ["127.0.0.0/8", "127.0.0.1:8080", "0.0.0.0/8", "::1", "localhost:80", "*.localhost"];
    expect(flagged(policy(rules))).toEqual([
      "127.0.0.0/8",
      "127.0.0.1/32:8080",
      "0.0.0.0/8",
      "::1/128",
      "localhost:80",
      "*.localhost",
    ]);
    const [first] = lintEgressPolicy(policy(rules));
    expect(first!.why).toContain("--allow-loopback");
    // Allowed now: only the rule 127.0.0.0/8 already covers is left.
    expect(flagged(policy(rules, { allowLoopback: true }))).toEqual(["127.0.0.1/32:8080"]);
  });

  it("flags link-local and cloud metadata rules without --allow-link-local", () => {
    const rules = ["169.254.169.254:80", "169.254.0.0/16", "[fe80::/64]:22", "fd00:ec2::254"];
    expect(flagged(policy(rules))).toHaveLength(4);
    expect(lintEgressPolicy(policy(rules))[0]!.why).toContain("--allow-link-local");
    expect(flagged(policy(rules, { allowLinkLocal: true }))).toEqual([]);
  });

  it("does not flag a network that only overlaps a refused class: the rest of it is reachable", () => {
    expect(flagged(policy(["0.0.0.0/0", "::/0", "*"]))).toEqual([]);
    expect(flagged(policy(["120.0.0.0/5", "fe00::/7"]))).toEqual([]);
  });

  it("flags a rule an earlier one already covers, by network, name and port, naming that rule", () => {
    const p = policy([
      "10.0.0.0/8:443,8000-9000",
      "10.1.0.0/16:443",
      "10.2.0.0/16:8080",
      "10.3.0.0/16:22",
      "*.svc:443",
      "a.svc:443",
      "a.svc:80",
      "*",
      "b.example",
    ]);
    expect(lintEgressPolicy(p)).toEqual([
      {
        rule: "10.1.0.0/16:443",
        why: "never decides a dial: the earlier rule 10.0.0.0/8:443,8000-9000 already allows everything it does",
      },
      { rule: "10.2.0.0/16:8080", why: expect.stringContaining("10.0.0.0/8:443,8000-9000") },
      { rule: "a.svc:443", why: expect.stringContaining("*.svc:443") },
      { rule: "b.example", why: expect.stringContaining("earlier rule *") },
    ]);
    // Ports covered by two adjacent ranges together.
    expect(flagged(policy(["10.0.0.0/8:1-100,101-200", "10.0.0.0/24:50-150"]))).toEqual([
      "10.0.0.0/24:50-150",
    ]);
    // A later, wider rule is not covered by an earlier, narrower one.
    expect(flagged(policy(["10.1.0.0/16", "10.0.0.0/8"]))).toEqual([]);
  });

  it("every flagged rule allows nothing the policy without it refuses (checked against the judge)", () => {
    const p = policy([
      "10.0.0.0/8:443",
      "10.9.9.0/24:443",
      "127.0.0.1",
      "*.svc",
      "x.svc:1-65535",
      "localhost",
    ]);
    const flaggedRules = new Set(flagged(p));
    const without = policy(p.allow.filter((r) => !flaggedRules.has(r)));
    const targets = [
      ["10.9.9.9", 443],
      ["10.9.9.9", 80],
      ["127.0.0.1", 80],
      ["x.svc", 8080],
      ["localhost", 80],
    ] as const;
    for (const [host, port] of targets) {
      expect(compileEgressPolicy(without).judgeTarget(host, port).allowed).toBe(
        compileEgressPolicy(p).judgeTarget(host, port).allowed,
      );
    }
  });
});
