/**
 * The benchmark's HTTP front (bench/harness/http-backend.ts), which curl's rows move bytes
 * through: a figure counts only bytes that were checked, so an upload that differs from the
 * pattern, or stops short, must be refused rather than acknowledged; and curl's write-out lines
 * must be read out of whatever else curl wrote around them (its --parallel progress meter).
 */

import { request } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseTimings } from "../../bench/harness/curl.js";
import { createHttpBackend } from "../../bench/harness/http-backend.js";
import { PatternCheck, PatternSource } from "../../bench/harness/pattern.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

interface Answer {
  status: number;
  body: Buffer;
}

function call(port: number, method: string, path: string, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (c: Buffer) => parts.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts) }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const pattern = (start: number, n: number) => Buffer.from(new PatternSource(start).next(n));

describe("the benchmark's HTTP backend", () => {
  const baseline = activeResources();
  const server = createHttpBackend();
  let port = 0;
  beforeAll(async () => {
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((r) => server.close(() => r()));
    await expectNoLeakedResources(baseline);
  });

  it("serves the pattern from the asked offset", async () => {
    const a = await call(port, "GET", "/download?n=100000&start=777");
    expect(a.status).toBe(200);
    const check = new PatternCheck(777);
    expect(check.accept(a.body)).toBe(true);
    expect(check.checked).toBe(100_000);
  });

  it("acknowledges an upload only when every byte is the pattern", async () => {
    const ok = await call(port, "PUT", "/upload?n=50000&start=5", pattern(5, 50_000));
    expect(ok.status).toBe(200);

    const bad = pattern(5, 50_000);
    bad[31_000] = bad[31_000]! ^ 0xff;
    const refused = await call(port, "PUT", "/upload?n=50000&start=5", bad);
    expect(refused.status).toBe(422);
    expect(refused.body.toString()).toContain("differ");

    const short = await call(port, "PUT", "/upload?n=50000&start=5", pattern(5, 40_000));
    expect(short.status).toBe(422);
    expect(short.body.toString()).toContain("40000 of 50000");
  });

  it("answers /ping with the one PONG byte", async () => {
    const a = await call(port, "GET", "/ping");
    expect(a.status).toBe(200);
    expect([...a.body]).toEqual([0x4b]);
  });
});

describe("curl's write-out lines", () => {
  it("are found among its progress meter and error text, and only complete ones count", () => {
    const text =
      "DL% UL%  Dled  Uled  Xfers\r--  --  0  0  9  8     0      KGWBENCH 200 1 0 0.082299 0.084639 0.084724\n" +
      "curl: (7) Failed to connect\n" +
      "KGWBENCH 200 1 0 0.001 0.002 0.003\n" +
      "KGWBENCH 200 1 0 0.001 0.002\n";
    const t = parseTimings(text);
    expect(t).toHaveLength(2);
    expect(t[0]).toMatchObject({ status: 200, sizeDownload: 1 });
    expect(t[0]!.starttransferMs).toBeCloseTo(84.639, 3);
    expect(t[1]!.totalMs).toBeCloseTo(3, 6);
  });
});
