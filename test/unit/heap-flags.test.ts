import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { EXTERNAL_MEMORY_IN_GLOBAL_LIMIT, setDataPathHeapFlags } from "../../lib/transport/heap-flags.js";

describe("setDataPathHeapFlags", () => {
  it("accounts external memory in V8's global limit on Node 24's V8", () => {
    const set: string[] = [];
    const done = setDataPathHeapFlags({ v8Version: "13.6.233.17-node.63", setFlags: (f) => set.push(f) });
    expect(set).toEqual([EXTERNAL_MEMORY_IN_GLOBAL_LIMIT]);
    expect(done).toEqual(set);
  });

  it("sets nothing on Node 20's V8, which does not know the flag", () => {
    const set: string[] = [];
    expect(setDataPathHeapFlags({ v8Version: "11.3.244.8-node.38", setFlags: (f) => set.push(f) })).toEqual(
      [],
    );
    expect(set).toEqual([]);
  });

  it("is accepted by this Node's V8: nothing on stderr (an unknown flag prints 'unrecognized flag')", () => {
    const script = `import { setDataPathHeapFlags } from "./lib/transport/heap-flags.ts"; setDataPathHeapFlags();`;
    const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      encoding: "utf8",
    });
    expect(r.stderr).toBe("");
    expect(r.status).toBe(0);
  });
});
