/**
 * The status page's one way to make HTML: the `html` tagged template. Every interpolated value is
 * escaped unless it is already `Html` (made by this template), so a tenant's agent id, an
 * agent's claimed version or a peer's error text is always shown as text, never parsed as markup.
 * No other code in the page builds HTML from strings; the escaping function is the only place
 * that knows which characters matter.
 */

/** Markup built by `html`: the only value interpolated without escaping. */
export interface Html {
  readonly text: string;
}

/** Every Html this module made; anything else interpolated is text, whatever its shape. */
const made = new WeakSet<Html>();

function mint(text: string): Html {
  const h: Html = Object.freeze({ text, toString: () => text });
  made.add(h);
  return h;
}

const ENTITIES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
  "`": "&#96;",
};

/** C0 controls but tab, newline and carriage return, and DEL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is replaced
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;

/**
 * Text as HTML text or a quoted attribute's value: `&`, `<`, `>`, both quotes and the backtick
 * become entities (all the page ever puts values in is element text and double-quoted attributes;
 * the backtick for old engines that took it as a quote). Control characters, which no status
 * field should hold, show as U+FFFD rather than vanish.
 */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"'`]/g, (c) => ENTITIES[c]!).replace(CONTROL, "\ufffd");
}

/**
 * What may be interpolated: text (escaped), numbers, markup, lists of those; null, undefined and
 * false show nothing (so `cond && html\`…\`` works).
 */
export type HtmlValue = Html | string | number | false | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return "";
  if (Array.isArray(value)) return value.map(render).join("");
  if (typeof value === "object" && made.has(value as Html)) return (value as Html).text;
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]!) + strings[i + 1]!;
  return mint(out);
}
