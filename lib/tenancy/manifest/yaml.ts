/**
 * Block-style YAML for Kubernetes objects built as plain data. The `yaml` package is only a
 * development dependency (the tests parse with it), and a manifest needs a small, fixed subset,
 * so this writes it directly, on one rule: nothing a YAML parser reads can differ from the data.
 *
 * - A string is written plain only when it matches SAFE_PLAIN, which no YAML 1.1 or 1.2 parser
 *   (kubectl's go-yaml reads 1.1) resolves to anything but that string: it starts with a letter or
 *   `/` (never a number, `-`, `.inf`, an indicator) and is not a 1.1 boolean or null word.
 * - A multi-line string (a PEM bundle) is a literal block when that keeps it byte for byte.
 * - Anything else is double-quoted with JSON escapes, a subset of YAML's double-quoted escapes.
 * - Only printable ASCII reaches the output (other characters are refused, not escaped): every
 *   value of a manifest is ASCII by the time it gets here, and a surprise must not pass silently.
 */

type YamlScalar = string | number | boolean | null;
type YamlValue = YamlScalar | readonly YamlValue[] | YamlMap;
interface YamlMap {
  readonly [key: string]: YamlValue | undefined;
}

const SAFE_PLAIN = /^[A-Za-z/][A-Za-z0-9_./@+=-]*(?::[A-Za-z0-9_./@+=-]+)*$/;
/** YAML 1.1 reads these (in any case) as booleans or null. */
const YAML11_WORDS = /^(?:y|n|yes|no|true|false|on|off|null)$/i;
const INDENT = "  ";

/**
 * One document: `value`, a mapping of plain data (objects, arrays, strings, safe integers,
 * booleans, null; undefined properties are left out). Anything else is a TypeError: the typed
 * objects of a manifest have nothing else, and a Buffer or a Date written as a map would be wrong.
 */
export function yamlDocument(value: object): string {
  const map = plainData(value, "");
  if (!isMap(map)) throw new TypeError("a YAML document must be a mapping");
  return `${mapLines(map, "").join("\n")}\n`;
}

/** Documents separated by `---`, with `comment` lines (`# …`) heading the first. */
export function yamlStream(documents: readonly object[], comment: readonly string[] = []): string {
  const head = comment.map((line) => `# ${checkAscii(line)}`.trimEnd()).join("\n");
  const body = documents.map(yamlDocument).join("---\n");
  return head === "" ? body : `${head}\n${body}`;
}

function mapLines(map: YamlMap, indent: string): string[] {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(map)) {
    if (value === undefined) continue;
    const k = `${indent}${keyText(key)}:`;
    if (isNonEmptyMap(value)) lines.push(k, ...mapLines(value, indent + INDENT));
    // A sequence under a key sits at the key's indentation, as kubectl writes it.
    else if (isNonEmptyList(value)) lines.push(k, ...listLines(value, indent));
    else lines.push(...valueLines(k, value, indent));
  }
  return lines;
}

function listLines(list: readonly YamlValue[], indent: string): string[] {
  const lines: string[] = [];
  for (const item of list) {
    if (isNonEmptyMap(item) || isNonEmptyList(item)) {
      // The item's block, one level in, with "- " in place of the first line's indentation.
      const inner = isNonEmptyMap(item) ? mapLines(item, indent + INDENT) : listLines(item, indent + INDENT);
      inner[0] = `${indent}- ${inner[0]!.slice(indent.length + INDENT.length)}`;
      lines.push(...inner);
    } else {
      lines.push(...valueLines(`${indent}-`, item, indent));
    }
  }
  return lines;
}

/** `prefix` (a key with its colon, or a dash) followed by a scalar, an empty collection or a block. */
function valueLines(prefix: string, value: YamlValue, indent: string): string[] {
  if (Array.isArray(value)) return [`${prefix} []`];
  if (value !== null && typeof value === "object") return [`${prefix} {}`];
  if (typeof value === "string" && literalBlockFits(value)) {
    const chomp = value.endsWith("\n") ? "" : "-";
    const body = value.endsWith("\n") ? value.slice(0, -1) : value;
    return [
      `${prefix} |${chomp}`,
      ...body.split("\n").map((l) => (l === "" ? "" : `${indent}${INDENT}${l}`)),
    ];
  }
  return [`${prefix} ${scalarText(value as YamlScalar)}`];
}

function scalarText(value: YamlScalar): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return String(value);
  if (typeof value === "number") return String(value);
  return SAFE_PLAIN.test(value) && !YAML11_WORDS.test(value) ? value : quoted(value);
}

function keyText(key: string): string {
  return SAFE_PLAIN.test(key) && !YAML11_WORDS.test(key) ? key : quoted(key);
}

function quoted(value: string): string {
  return JSON.stringify(checkAscii(value));
}

/**
 * A literal block reproduces the text exactly when: more than one line, printable ASCII only
 * (no tab, no CR), a first line that does not start with a space (it sets the indentation), no
 * trailing spaces (editors strip them), and at most one final newline (`|` keeps one, `|-` none).
 */
function literalBlockFits(value: string): boolean {
  return (
    value.includes("\n") &&
    /^[\x20-\x7e\n]*$/.test(value) &&
    !value.startsWith(" ") &&
    !value.startsWith("\n") &&
    !/ \n| $/.test(value) &&
    !value.endsWith("\n\n")
  );
}

function checkAscii(text: string): string {
  // C0 controls are fine: JSON escapes them. DEL and anything beyond ASCII are not printable.
  if (/[\u007f-\uffff]/.test(text)) throw new TypeError("YAML output is limited to ASCII");
  return text;
}

function plainData(value: unknown, where: string): YamlValue | undefined {
  if (value === undefined || value === null || typeof value === "string" || typeof value === "boolean") {
    return value;
  }
  if (typeof value === "number") {
    if (!Number.isSafeInteger(value)) throw new TypeError(`${where || "/"}: not a safe integer`);
    return value;
  }
  if (Array.isArray(value)) {
    return value.map((item, i) => {
      const v = plainData(item, `${where}/${i}`);
      if (v === undefined) throw new TypeError(`${where}/${i}: undefined in a list`);
      return v;
    });
  }
  const proto = typeof value === "object" ? Object.getPrototypeOf(value) : undefined;
  if (proto !== Object.prototype && proto !== null) throw new TypeError(`${where || "/"}: not plain data`);
  const out: Record<string, YamlValue | undefined> = {};
  for (const [k, v] of Object.entries(value as object)) out[k] = plainData(v, `${where}/${k}`);
  return out;
}

function isMap(v: YamlValue | undefined): v is YamlMap {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function isNonEmptyMap(v: YamlValue | undefined): v is YamlMap {
  // A key whose value is undefined is left out, so a map of only those is written as `{}`.
  return (
    typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).some((x) => x !== undefined)
  );
}

function isNonEmptyList(v: YamlValue | undefined): v is readonly YamlValue[] {
  return Array.isArray(v) && v.length > 0;
}
