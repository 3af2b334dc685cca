/**
 * What `kgw tenant policy` is to do, from its flags and rules: nothing (show), reset to the
 * default, or replace the policy with rules checked here already.
 */
import { type EgressPolicy, validateEgressPolicy } from "../../egress/egress-policy.js";
import { ConfigError } from "../../errors.js";
import { asConfig, type Values } from "./tenant-settings.js";

export function policyChange(
  f: Values,
  rules: readonly string[],
  given: ReadonlySet<string>,
): EgressPolicy | "default" | null {
  const flagsForSet = (["allow-loopback", "allow-link-local", "deny-all"] as const).filter((x) =>
    given.has(x),
  );
  if (f.default) {
    if (f.set || rules.length > 0 || flagsForSet.length > 0)
      throw new ConfigError("--default takes no rules and no other policy flags");
    return "default";
  }
  if (!f.set) {
    if (rules.length > 0)
      throw new ConfigError("rules are given with --set (which replaces the whole policy)");
    if (flagsForSet.length > 0) throw new ConfigError(`--${flagsForSet[0]} applies with --set`);
    return null;
  }
  // An empty policy refuses every dial: a slip of the shell (an unset variable) must not do it.
  if (rules.length === 0 && !f["deny-all"]) {
    throw new ConfigError(
      "--set with no RULE would refuse every dial of the tenant; give --deny-all to mean that, or --default to reset the policy",
    );
  }
  if (rules.length > 0 && f["deny-all"]) throw new ConfigError("--deny-all takes no RULE");
  return asConfig(() =>
    validateEgressPolicy({
      allow: rules,
      allowLoopback: f["allow-loopback"],
      allowLinkLocal: f["allow-link-local"],
    }),
  );
}
