/** "Did you mean": a close name is suggested, a far one never; flags get it from the shared parser. */
import { describe, expect, it } from "vitest";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { AGENT_FLAGS } from "../../lib/config/agent-options.js";
import { parseFlags } from "../../lib/config/flags.js";
import { SERVER_FLAGS } from "../../lib/config/server-flags.js";
import { closestName, didYouMean, editDistance } from "../../lib/util/did-you-mean.js";

const COMMANDS = ["server", "agent", "tenant", "pki", "demo", "help", "version"];

describe("editDistance", () => {
  it.each([
    ["tenant", "tenant", 0],
    ["tenat", "tenant", 1],
    ["tneant", "tenant", 1],
    ["", "pki", 3],
    ["kitten", "sitting", 3],
  ])("%s → %s is %d edits", (a, b, d) => {
    expect(editDistance(a, b)).toBe(d);
    expect(editDistance(b, a)).toBe(d);
  });
});

describe("closestName", () => {
  it.each([
    ["tenat", "tenant"],
    ["tneant", "tenant"],
    ["Tenant", "tenant"],
    ["serer", "server"],
    ["agnet", "agent"],
    ["pky", "pki"],
    ["versoin", "version"],
    ["ten", "tenant"],
  ])("suggests %s → %s", (typed, expected) => {
    expect(closestName(typed, COMMANDS)).toBe(expected);
  });

  it.each(["frobnicate", "x", "kubectl", "status-page", "a".repeat(10_000), ""])(
    "suggests nothing for %s: nothing is close",
    (typed) => {
      expect(closestName(typed, COMMANDS)).toBeUndefined();
    },
  );

  it("suggests nothing for an abbreviation two names share", () => {
    expect(closestName("re", ["revoke", "rotate"])).toBeUndefined();
    expect(closestName("rot", ["revoke", "rotate"])).toBe("rotate");
  });

  it("words the hint for an error line, or says nothing", () => {
    expect(didYouMean("gracee", ["grace"], "--")).toBe(" (did you mean --grace?)");
    expect(didYouMean("zzzzzz", ["grace"], "--")).toBe("");
  });
});

describe("unknown flags, for every command that parses with lib/config/flags.ts", () => {
  const message = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return (err as Error).message;
    }
    throw new Error("expected a refusal");
  };

  it.each([
    [SERVER_FLAGS, "--graceful-shutdown-timout=1s", "--graceful-shutdown-timeout"],
    [SERVER_FLAGS, "--admin-prot=1", "--admin-port"],
    [AGENT_FLAGS, "--proxy-server-hots=x", "--proxy-server-host"],
    [AGENT_FLAGS, "--hlep", "--help"],
  ] as const)("suggests the flag meant for %#", (specs, typed, meant) => {
    const m = message(() => parseFlags(specs, [typed]));
    expect(m).toContain(`unknown flag ${typed.split("=")[0]}`);
    expect(m).toContain(`did you mean ${meant}?`);
  });

  it("suggests nothing when no flag is close, and bounds what it repeats", () => {
    const m = message(() => parseFlags(SERVER_FLAGS, [`--${"x".repeat(5000)}`]));
    expect(m).not.toContain("did you mean");
    expect(m.length).toBeLessThan(200);
  });

  it("kgw tenant suggests flags and subcommands", () => {
    const env = { KGW_TENANT_STORE_DIR: "/tmp/kgw-none" };
    expect(message(() => parseTenantCommand(["delete", "acme", "--yse"], env))).toContain(
      "did you mean --yes?",
    );
    expect(message(() => parseTenantCommand(["delet", "acme"], env))).toContain("did you mean delete?");
    expect(message(() => parseTenantCommand(["install-tokn", "acme"], env))).toContain(
      "did you mean install-token?",
    );
    expect(message(() => parseTenantCommand(["zzzzzz", "acme"], env))).not.toContain("did you mean");
  });
});
