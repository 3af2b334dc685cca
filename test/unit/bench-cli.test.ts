/**
 * `npm run bench`'s options as parsed: --transfers (profile one transfer) takes a regular
 * expression and says so when it is not one; the defaults stand without it.
 */
import { describe, expect, it } from "vitest";
import { parseArgs } from "../../bench/harness/cli.js";
import type { BenchOptions } from "../../bench/harness/types.js";

const parsed = (argv: string[]) => parseArgs(argv) as BenchOptions;

describe("bench options", () => {
  it("--transfers keeps the transfers whose key matches", () => {
    const o = parsed(["--only", "throughput", "--transfers", "^go-kgw-upload$"]);
    expect(o.transfers?.test("go-kgw-upload")).toBe(true);
    expect(o.transfers?.test("go32k-kgw-upload")).toBe(false);
    expect(parsed(["--transfers=upload"]).transfers?.test("kgw-grpc-upload")).toBe(true);
  });

  it("without --transfers, measures everything", () => {
    expect(parsed(["--only", "throughput"]).transfers).toBeUndefined();
  });

  it("refuses a --transfers that is not a regular expression, or has no value", () => {
    expect(() => parseArgs(["--transfers", "go-(kgw"])).toThrow(/--transfers must be a regular expression/);
    expect(() => parseArgs(["--transfers"])).toThrow("--transfers needs a value");
  });
});
