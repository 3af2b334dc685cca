import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../lib/observability/logger.js";

function capture() {
  const sink = new PassThrough();
  const lines: string[] = [];
  sink.on("data", (c: Buffer) => lines.push(...c.toString().split("\n").filter(Boolean)));
  return { log: createLogger({ name: "t", level: "info", destination: sink }), lines };
}

describe("logger", () => {
  it("writes JSON lines with the level name", async () => {
    const { log, lines } = capture();
    log.child({ agentId: "a1" }).info({ connectId: "7" }, "hello");
    await new Promise((r) => setImmediate(r));
    const rec = JSON.parse(lines[0]!);
    expect(rec).toMatchObject({ level: "info", agentId: "a1", connectId: "7", msg: "hello" });
  });

  it("redacts credentials wherever a logged object carries them", async () => {
    const { log, lines } = capture();
    log.info(
      { authorization: "Bearer s3cret", token: "s3cret", metadata: { authorization: "Bearer s3cret" } },
      "x",
    );
    log.info({ options: { token: "s3cret", password: "s3cret" } }, "y");
    await new Promise((r) => setImmediate(r));
    expect(lines.join("\n")).not.toContain("s3cret");
    expect(lines.join("\n")).toContain("[REDACTED]");
  });
});
