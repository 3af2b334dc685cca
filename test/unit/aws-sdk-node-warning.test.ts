/**
 * The AWS SDK's Node.js-version switch: set for a client's construction only, only on a Node.js
 * the SDK warns about (below 22), never over the operator's own setting.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  NODE_VERSION_WARNING_SWITCH,
  sdkWarnsOnNode,
  withoutNodeVersionWarning,
} from "../../lib/util/aws-sdk-node-warning.js";

const NODE_20 = "v20.19.0";
const saved = process.env[NODE_VERSION_WARNING_SWITCH];
afterEach(() => {
  if (saved === undefined) delete process.env[NODE_VERSION_WARNING_SWITCH];
  else process.env[NODE_VERSION_WARNING_SWITCH] = saved;
});

const switchWhileBuilding = (nodeVersion: string) =>
  withoutNodeVersionWarning(() => process.env[NODE_VERSION_WARNING_SWITCH], nodeVersion);

describe("withoutNodeVersionWarning", () => {
  it("sets the switch while building on Node.js 20, and removes it afterwards", () => {
    delete process.env[NODE_VERSION_WARNING_SWITCH];
    expect(switchWhileBuilding(NODE_20)).toBe("true");
    expect(NODE_VERSION_WARNING_SWITCH in process.env).toBe(false);
  });

  it("does nothing on Node.js 22 and later, where the SDK does not warn", () => {
    delete process.env[NODE_VERSION_WARNING_SWITCH];
    for (const version of ["v22.0.0", "v24.22.3", "v26.12.1"]) {
      expect(switchWhileBuilding(version), version).toBeUndefined();
    }
    expect(NODE_VERSION_WARNING_SWITCH in process.env).toBe(false);
  });

  it("decides on the major version as the SDK does", () => {
    expect(["v18.20.8", "v20.20.2", "v21.7.3"].map(sdkWarnsOnNode)).toEqual([true, true, true]);
    expect(["v22.0.0", "v24.22.3", "v100.0.0"].map(sdkWarnsOnNode)).toEqual([false, false, false]);
    // Something that is no version: leave the SDK alone rather than guess.
    expect(sdkWarnsOnNode("")).toBe(false);
  });

  it("removes it when building throws too", () => {
    delete process.env[NODE_VERSION_WARNING_SWITCH];
    expect(() =>
      withoutNodeVersionWarning(() => {
        throw new Error("no region");
      }, NODE_20),
    ).toThrow("no region");
    expect(NODE_VERSION_WARNING_SWITCH in process.env).toBe(false);
  });

  it("leaves an operator's own setting alone; empty counts as not set", () => {
    process.env[NODE_VERSION_WARNING_SWITCH] = "false";
    expect(switchWhileBuilding(NODE_20)).toBe("false");
    process.env[NODE_VERSION_WARNING_SWITCH] = "";
    expect(switchWhileBuilding(NODE_20)).toBe("true");
    expect(process.env[NODE_VERSION_WARNING_SWITCH]).toBe("");
  });
});
