/** The AWS SDK's Node.js-version switch is set for a client's construction only, never over the operator's. */
import { afterEach, describe, expect, it } from "vitest";
import {
  NODE_VERSION_WARNING_SWITCH,
  withoutNodeVersionWarning,
} from "../../lib/commands/tenant/quiet-aws-sdk.js";

const saved = process.env[NODE_VERSION_WARNING_SWITCH];
afterEach(() => {
  if (saved === undefined) delete process.env[NODE_VERSION_WARNING_SWITCH];
  else process.env[NODE_VERSION_WARNING_SWITCH] = saved;
});

describe("withoutNodeVersionWarning", () => {
  it("sets the switch while building, and removes it afterwards", () => {
    delete process.env[NODE_VERSION_WARNING_SWITCH];
    expect(withoutNodeVersionWarning(() => process.env[NODE_VERSION_WARNING_SWITCH])).toBe("true");
    expect(NODE_VERSION_WARNING_SWITCH in process.env).toBe(false);
  });

  it("removes it when building throws too", () => {
    delete process.env[NODE_VERSION_WARNING_SWITCH];
    expect(() =>
      withoutNodeVersionWarning(() => {
        throw new Error("no region");
      }),
    ).toThrow("no region");
    expect(NODE_VERSION_WARNING_SWITCH in process.env).toBe(false);
  });

  it("leaves an operator's own setting alone; empty counts as not set", () => {
    process.env[NODE_VERSION_WARNING_SWITCH] = "false";
    expect(withoutNodeVersionWarning(() => process.env[NODE_VERSION_WARNING_SWITCH])).toBe("false");
    process.env[NODE_VERSION_WARNING_SWITCH] = "";
    expect(withoutNodeVersionWarning(() => process.env[NODE_VERSION_WARNING_SWITCH])).toBe("true");
    expect(process.env[NODE_VERSION_WARNING_SWITCH]).toBe("");
  });
});
