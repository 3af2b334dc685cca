import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { budgetedInfo } from "../../lib/observability/log-budget.js";
import { createLogger } from "../../lib/observability/logger.js";

function capture() {
  const lines: Array<{ level: string; msg: string; heldBack?: number }> = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split("\n")) if (l) lines.push(JSON.parse(l));
      cb();
    },
  });
  return { log: createLogger({ level: "debug", name: "t", destination }), lines };
}

describe("budgetedInfo", () => {
  it("writes its budget a second at info, the rest at debug, and says how many it held back", () => {
    const { log, lines } = capture();
    let t = 0;
    const info = budgetedInfo(log, 3, () => t);
    for (let i = 0; i < 10; i++) info({ i }, "refused a caller");
    expect(lines.map((l) => l.level)).toEqual([...Array(3).fill("info"), ...Array(7).fill("debug")]);
    t += 1_000;
    info({}, "refused a caller");
    const last = lines.at(-1)!;
    expect(last.level).toBe("info");
    expect(last.heldBack).toBe(7);
    expect(last.msg).toBe("refused a caller");
    info({}, "refused a caller");
    expect(lines.at(-1)!.heldBack).toBeUndefined();
  });
});
