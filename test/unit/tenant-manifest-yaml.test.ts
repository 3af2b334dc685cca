/**
 * The manifest's YAML writer (lib/tenancy/manifest/yaml.ts): whatever it is given, an independent
 * parser reads back exactly that data, in YAML 1.2 and in YAML 1.1 (kubectl's go-yaml), including
 * the strings a careless writer turns into booleans, numbers, nulls, dates or merge keys.
 */
import { describe, expect, it } from "vitest";
import { parse, parseAllDocuments } from "yaml";
import { yamlDocument, yamlStream } from "../../lib/tenancy/manifest/yaml.js";

const readBoth = (text: string) =>
  (["1.2", "1.1"] as const).map((version) =>
    parse(text, { version, strict: true, uniqueKeys: true, prettyErrors: false, maxAliasCount: 0 }),
  );

/** Strings that YAML 1.1 or 1.2 would read as something else if written plain. */
const TRICKY = [
  "yes",
  "No",
  "ON",
  "off",
  "y",
  "N",
  "true",
  "False",
  "null",
  "Null",
  "~",
  "",
  "0755",
  "0o17",
  "0x1F",
  "1e3",
  "-.5",
  ".inf",
  "-.Inf",
  ".NaN",
  "+1",
  "1_000",
  "12:30",
  "190:20:30",
  "2001-12-14",
  "2001-12-14t21:59:43.10-05:00",
  "=",
  "<<",
  "-",
  "--flag=x",
  "---",
  "...",
  "a: b",
  "a:",
  ":a",
  "a #b",
  "#x",
  "- x",
  "? x",
  "[x]",
  "{x}",
  "*a",
  "&a",
  "!t",
  "%x",
  "@x",
  "`x",
  "'q'",
  '"q"',
  "|",
  ">",
  " lead",
  "trail ",
  "tab\there",
  "bell\u0007",
  "a\\b",
  "multi\nline\n",
  "multi\nline",
  "multi\n\n",
  "\nlead",
  " indented\nsecond\n",
  "trailing \nspace\n",
  "$(POD_NAME)",
  "--agent-id=$(POD_NAME)",
  "/etc/kgw/ca/ca.crt",
  "ghcr.io/x/kgw:0.1.0",
  "100m",
  "8093",
];

describe("the manifest's YAML", () => {
  it.each(TRICKY)("keeps %j a string, as a value, a key and a list item", (s) => {
    const data = { value: s, [s]: "key", list: [s, { nested: s }] };
    for (const back of readBoth(yamlDocument(data))) expect(back).toEqual(data);
  });

  it("keeps numbers, booleans, null, empty collections and nested lists", () => {
    const data = {
      n: 0,
      big: 2 ** 53 - 1,
      neg: -7,
      t: true,
      f: false,
      nothing: null,
      emptyList: [],
      emptyMap: {},
      lists: [[1, [2, 3]], [], [{}], [{ a: [] }]],
      deep: { a: { b: { c: ["x", { d: "y\nz\n" }] } } },
    };
    for (const back of readBoth(yamlDocument(data))) expect(back).toEqual(data);
  });

  it("writes a PEM bundle as a literal block, byte for byte", () => {
    const pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const text = yamlDocument({ data: { "ca.crt": pem } });
    expect(text).toBe(
      "data:\n  ca.crt: |\n    -----BEGIN CERTIFICATE-----\n    MIIB\n    -----END CERTIFICATE-----\n",
    );
    for (const back of readBoth(text)) expect(back).toEqual({ data: { "ca.crt": pem } });
  });

  it("leaves out undefined properties; a map of only those is {}", () => {
    const text = yamlDocument({ a: undefined, b: { c: undefined }, d: 1 });
    for (const back of readBoth(text)) expect(back).toEqual({ b: {}, d: 1 });
  });

  it("separates documents and heads the first with the comment", () => {
    const text = yamlStream([{ kind: "A" }, { kind: "B" }], ["line one", "", "line three"]);
    expect(text).toBe("# line one\n#\n# line three\nkind: A\n---\nkind: B\n");
    expect(parseAllDocuments(text).map((d) => d.toJS())).toEqual([{ kind: "A" }, { kind: "B" }]);
  });

  it.each([
    ["a non-ASCII string", { a: "café" }],
    ["a non-ASCII key", { é: 1 }],
    ["a fraction", { a: 1.5 }],
    ["an unsafe integer", { a: 2 ** 53 }],
    ["NaN", { a: Number.NaN }],
    ["a Date", { a: new Date(0) }],
    ["a Buffer", { a: Buffer.from("x") }],
    ["undefined in a list", { a: [undefined] }],
    ["a function", { a: () => 1 }],
    ["a bigint", { a: 1n }],
  ])("refuses %s rather than write something else", (_what, data) => {
    expect(() => yamlDocument(data)).toThrow(TypeError);
  });

  it("refuses a document that is not a mapping, and a comment beyond ASCII", () => {
    expect(() => yamlDocument([1] as unknown as object)).toThrow(TypeError);
    expect(() => yamlStream([{ a: 1 }], ["naïve"])).toThrow(TypeError);
  });
});
