/** The `kgw` command as a user runs it. */
import { describe, expect, it } from "vitest";
import { spawnKgw } from "../helpers/kgw-process.js";

async function run(args: string[]): Promise<{ code: number | null; out: string }> {
  const p = spawnKgw(args);
  const { code } = await p.exited;
  return { code, out: p.output.join("") };
}

describe("kgw", () => {
  it("demo --once shows a request going through the tunnel and exits 0", async () => {
    const { code, out } = await run(["demo", "--once", "--ephemeral-ports"]);
    expect(out).toMatch(/answer {2}: 200 hello from inside the cluster: you asked for GET \/demo/);
    expect(code).toBe(0);
  });

  it.each([
    ["server", "--graceful-shutdown-timeout"],
    ["agent", "--proxy-server-host"],
  ])("%s --help lists the upstream flag names", async (command, flag) => {
    const { code, out } = await run([command, "--help"]);
    expect(code).toBe(0);
    expect(out).toContain(flag);
  });

  it("rejects an unknown command and an unknown flag with exit code 2", async () => {
    expect((await run(["frobnicate"])).code).toBe(2);
    const bad = await run(["agent", "--no-such-flag"]);
    expect(bad.code).toBe(2);
    expect(bad.out).toContain("unknown flag --no-such-flag");
  });
});
