import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cdk/lib/constructs/gateway-service.js";

const conf = readFileSync(`${REPO_ROOT}/cdk/log-router/kgw.conf`, "utf8");
const dockerfile = readFileSync(`${REPO_ROOT}/cdk/log-router/Dockerfile`, "utf8");

/** [FILTER]/[OUTPUT] sections as key → value maps, in order. */
function sections(text: string): { name: string; keys: [string, string][] }[] {
  const out: { name: string; keys: [string, string][] }[] = [];
  for (const line of text.split("\n")) {
    const t = line.trim();
    if (t === "" || t.startsWith("#")) continue;
    const header = /^\[(\w+)\]$/.exec(t);
    if (header) out.push({ name: header[1]!, keys: [] });
    else {
      const [k, ...v] = t.split(/\s+/);
      out.at(-1)!.keys.push([k!, v.join(" ")]);
    }
  }
  return out;
}

describe("the FireLens log router's configuration", () => {
  const s = sections(conf);
  const get = (i: number, key: string) => s[i]!.keys.filter(([k]) => k === key).map(([, v]) => v);

  it("parses each gateway line as JSON, then moves stderr and pino records (level) to ops", () => {
    expect(s.map((x) => x.name)).toEqual(["SERVICE", "FILTER", "FILTER", "OUTPUT", "OUTPUT"]);
    expect(get(1, "Name")).toEqual(["parser"]);
    expect(get(1, "Parser")).toEqual(["json"]);
    expect(get(2, "Name")).toEqual(["rewrite_tag"]);
    expect(get(2, "Rule")).toEqual(["$source ^stderr$ ops.$TAG false", "$level ^.+$ ops.$TAG false"]);
  });

  it("writes ops and audit to the log groups the task definition names, creating none", () => {
    expect(get(3, "Match")).toEqual(["ops.*"]);
    expect(get(3, "log_group_name")).toEqual([`\${KGW_OPS_LOG_GROUP}`]);
    expect(get(4, "Match")).toEqual(["gateway-firelens-*"]);
    expect(get(4, "log_group_name")).toEqual([`\${KGW_AUDIT_LOG_GROUP}`]);
    for (const i of [3, 4]) {
      expect(get(i, "Name")).toEqual(["cloudwatch_logs"]);
      expect(get(i, "auto_create_group")).toEqual(["false"]);
    }
  });

  it("is baked into a pinned AWS for Fluent Bit image", () => {
    expect(dockerfile).toMatch(
      /^FROM public\.ecr\.aws\/aws-observability\/aws-for-fluent-bit:\d+\.\d+\.\d+/m,
    );
    expect(dockerfile).toContain("COPY kgw.conf /fluent-bit/etc/kgw.conf");
  });
});
