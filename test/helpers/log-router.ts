/**
 * What the task's log router (cdk/log-router/) does to a line, read from its configuration files
 * and applied as Fluent Bit applies them, for tests that feed it the gateway's real lines:
 * the kgw_json parser (JSON, then "time" by Time_Format) and rewrite_tag's rules in order.
 *
 * Fluent Bit is not packaged for this machine (no Debian package; it is not on PyPI or npm), so
 * this is the next best check: its time parsing reimplemented for the conversions our formats
 * use, after flb_parser.c (a format's "%S.%L" is split: strptime up to %S, the fraction, then
 * strptime of the rest) and flb_strptime.c (%z takes Z, ±hh, ±hhmm, ±hh:mm).
 */
import { readFileSync } from "node:fs";
import { REPO_ROOT } from "../../cdk/lib/constructs/gateway-service.js";

export interface ConfSection {
  name: string;
  keys: [string, string][];
}

/** A Fluent Bit classic-mode file's [SECTION]s, each as its key/value pairs in order. */
export function confSections(file: string): ConfSection[] {
  const out: ConfSection[] = [];
  for (const line of readFileSync(`${REPO_ROOT}/cdk/log-router/${file}`, "utf8").split("\n")) {
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

export const confValues = (s: ConfSection, key: string): string[] =>
  s.keys.filter(([k]) => k.toLowerCase() === key.toLowerCase()).map(([, v]) => v);

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

interface Parsed {
  fields: Partial<Record<"Y" | "m" | "d" | "H" | "M" | "S", number>>;
  offsetSeconds: number;
  rest: string;
}

/** strptime for the conversions used here; null where Fluent Bit's would fail. */
function strptime(input: string, format: string, into: Parsed): Parsed | null {
  let s = input;
  const num = (max: number, lo: number, hi: number): number | null => {
    const m = new RegExp(`^\\d{1,${max}}`).exec(s);
    if (!m) return null;
    const n = Number(m[0]);
    if (n < lo || n > hi) return null;
    s = s.slice(m[0].length);
    return n;
  };
  for (let i = 0; i < format.length; i++) {
    const c = format[i]!;
    if (c !== "%") {
      if (s[0] !== c) return null;
      s = s.slice(1);
      continue;
    }
    const conv = format[++i];
    const ranges = {
      Y: [4, 0, 9999],
      m: [2, 1, 12],
      d: [2, 1, 31],
      H: [2, 0, 23],
      M: [2, 0, 59],
      S: [2, 0, 60],
    } as const;
    if (conv && conv in ranges) {
      const [max, lo, hi] = ranges[conv as keyof typeof ranges];
      const n = num(max, lo, hi);
      if (n === null) return null;
      into.fields[conv as keyof typeof ranges] = n;
    } else if (conv === "b") {
      const month = MONTHS.findIndex((name) => s.toLowerCase().startsWith(name.toLowerCase()));
      if (month < 0) return null;
      into.fields.m = month + 1;
      s = s.slice(3);
    } else if (conv === "z") {
      s = s.trimStart();
      if (s[0] === "Z") {
        into.offsetSeconds = 0;
        s = s.slice(1);
        continue;
      }
      const m = /^([+-])(\d\d):?(\d\d)?/.exec(s);
      if (!m) return null;
      into.offsetSeconds = (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 3600 + Number(m[3] ?? 0) * 60);
      s = s.slice(m[0].length);
    } else {
      throw new Error(`the test's strptime has no %${conv}`);
    }
  }
  into.rest = s;
  return into;
}

/**
 * The instant (ms since the epoch) Fluent Bit reads from `value` with `format`, or null where it
 * logs "invalid time format" and stamps the record with the time it arrived instead.
 */
export function fluentBitTime(value: string, format: string): number | null {
  const p: Parsed = { fields: {}, offsetSeconds: 0, rest: "" };
  const split = format.indexOf("%S.%L");
  let fraction = 0;
  if (split >= 0) {
    if (!strptime(value, format.slice(0, split + 2), p)) return null;
    const m = /^\.(\d+)/.exec(p.rest);
    if (!m) return null;
    fraction = Number(`0.${m[1]}`);
    if (!strptime(p.rest.slice(m[0].length), format.slice(split + 5), p)) return null;
  } else if (!strptime(value, format, p)) return null;
  if (p.rest !== "") return null;
  const f = p.fields;
  if (f.Y === undefined || f.m === undefined || f.d === undefined) return null;
  const utc = Date.UTC(f.Y, f.m - 1, f.d, f.H ?? 0, f.M ?? 0, f.S ?? 0);
  return utc - p.offsetSeconds * 1000 + Math.round(fraction * 1000);
}

/** The router's parser named `name`, from the file its [SERVICE] section loads. */
export function routerParser(name: string): {
  format: string;
  timeKey: string;
  timeFormat: string;
  timeKeep: boolean;
} {
  const service = confSections("kgw.conf").find((s) => s.name === "SERVICE")!;
  const files = confValues(service, "Parsers_File").map((f) => f.replace(/^\/fluent-bit\/etc\//, ""));
  for (const file of files) {
    const parser = confSections(file).find((s) => s.name === "PARSER" && confValues(s, "Name")[0] === name);
    if (!parser) continue;
    const one = (k: string) => confValues(parser, k)[0] ?? "";
    return {
      format: one("Format"),
      timeKey: one("Time_Key"),
      timeFormat: one("Time_Format"),
      timeKeep: one("Time_Keep").toLowerCase() === "on",
    };
  }
  throw new Error(`no parser ${name} in ${files.join(", ")}`);
}

/**
 * Where the router sends one line the gateway wrote on `source`: the parser filter, then the
 * rewrite_tag rules in order (a rule "$key regex newtag false" moves a record whose top-level
 * string `key` matches), else the tag it came with. Returns the output's log group variable and
 * the record's timestamp (null: the line's own time was not read).
 */
export function routeLine(
  line: string,
  source: "stdout" | "stderr" = "stdout",
): { logGroup: string; time: number | null; record: Record<string, unknown> } {
  const sections = confSections("kgw.conf");
  const filters = sections.filter((s) => s.name === "FILTER");
  const parserFilter = filters.find((s) => confValues(s, "Name")[0] === "parser")!;
  const parser = routerParser(confValues(parserFilter, "Parser")[0]!);
  let record: Record<string, unknown> = { log: line, source };
  let time: number | null = null;
  try {
    const parsed = JSON.parse(line) as unknown;
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      // Reserve_Data On: the other fields stay; Preserve_Key off: "log" goes.
      record = { source, ...(parsed as Record<string, unknown>) };
      const t = record[parser.timeKey];
      if (typeof t === "string") time = fluentBitTime(t, parser.timeFormat);
      if (!parser.timeKeep) delete record[parser.timeKey];
    }
  } catch {
    // Not JSON: the record stays as it came.
  }
  let tag = "gateway-firelens-0123";
  const rewrite = filters.find((s) => confValues(s, "Name")[0] === "rewrite_tag")!;
  for (const rule of confValues(rewrite, "Rule")) {
    const [key, regex, newTag] = rule.split(/\s+/);
    const value = record[key!.replace(/^\$/, "")];
    if (typeof value === "string" && new RegExp(regex!).test(value)) {
      tag = newTag!.replace("$TAG", tag);
      break;
    }
  }
  const matches = (pattern: string) =>
    new RegExp(`^${pattern.replace(/[.]/g, "\\.").replace(/\*/g, ".*")}$`).test(tag);
  const output = sections.find((s) => s.name === "OUTPUT" && matches(confValues(s, "Match")[0]!))!;
  return { logGroup: confValues(output, "log_group_name")[0]!, time, record };
}
