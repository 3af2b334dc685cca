/**
 * The Go bench client (test/interop/cmd/kgw-bench-client) rebuilds the benchmark's content
 * pattern in Go to check every byte it downloads and to send what it uploads: its pattern must be
 * the TypeScript one (bench/harness/pattern.ts) byte for byte, or every transfer between the two
 * would fail, or, worse, a wrong pattern on both ends of one path would check nothing. Compared
 * at entry offsets that wrap around the pattern's period and over more than one period.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { goClientBinary } from "../../bench/harness/go-client.js";
import { PATTERN_PERIOD, PatternSource } from "../../bench/harness/pattern.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

const run = promisify(execFile);
/** A cold build compiles grpc-go and the konnectivity-client. */
const BUILD_MS = 600_000;

function tsPattern(start: number, bytes: number): Buffer {
  const source = new PatternSource(start);
  const parts: Buffer[] = [];
  for (let left = bytes; left > 0; ) {
    const part = Buffer.from(source.next(Math.min(left, PATTERN_PERIOD)));
    parts.push(part);
    left -= part.length;
  }
  return Buffer.concat(parts);
}

describe("the Go bench client's content pattern", () => {
  const baseline = activeResources();
  const dir = mkdtempSync(path.join(tmpdir(), "kgw-bench-pattern-"));
  let bin = "";
  beforeAll(async () => {
    bin = await goClientBinary(() => {});
  }, BUILD_MS);
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await expectNoLeakedResources(baseline);
  });

  const cases: [string, number, number][] = [
    ["from the start", 0, 4096],
    ["across the period's end", PATTERN_PERIOD - 1000, 5000],
    ["over two periods from an odd offset", 12_345, 2 * PATTERN_PERIOD + 7],
  ];
  for (const [name, start, bytes] of cases) {
    it(`is the TypeScript pattern byte for byte, ${name}`, async () => {
      const out = path.join(dir, `${start}-${bytes}.bin`);
      await run(bin, ["-mode=pattern", `-start=${start}`, `-bytes=${bytes}`, `-out=${out}`]);
      const go = readFileSync(out);
      const ts = tsPattern(start, bytes);
      expect(go.length).toBe(bytes);
      const firstDiff = go.findIndex((b, i) => b !== ts[i]);
      expect(firstDiff, "first byte that differs").toBe(-1);
    });
  }
});
