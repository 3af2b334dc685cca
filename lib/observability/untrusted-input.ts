/**
 * What a log line may keep of text an unauthenticated peer sent (a request path, a request line,
 * a message quoting either). Such text can carry a credential: an install link's path is
 * `/v1/install/<install-token>.yaml`, and anyone who reads the token in a log can redeem it. So
 * the rule is the same for every input, not a case per route:
 *
 * - a path keeps its first segment (when it is a short plain word) and the extension of its
 *   last, nothing else: `/v1/install/kgw_install_….yaml` is logged as `/v1/<redacted>.yaml`;
 *   the query is dropped. Paths the server itself serves (its gRPC methods) are passed as
 *   `known` and kept whole: they are ours, not the peer's.
 * - any other text has every path in it shaped so, every word long enough to be a secret
 *   (LONG_WORD_CHARS; a token, a key, a hash) replaced by `<redacted>`, and is cut to
 *   MAX_UNTRUSTED_TEXT_CHARS.
 * - header values are never given to it: a log line names the header, not what it held.
 */

/**
 * Longest text of unauthenticated origin a log line keeps, per field. Enough for a reason with a
 * shaped path in it; an 8 KB path must not make an 8 KB line.
 */
export const MAX_UNTRUSTED_TEXT_CHARS = 160;
/**
 * Words this long are taken for secrets: 128 random bits are at least 22 characters in base64
 * and 32 in hex, and no word of ours or of a route is as long.
 */
export const LONG_WORD_CHARS = 20;
/** A path's first segment is kept only when it is a plain word this short (`v1`, `healthz`). */
const MAX_KEPT_SEGMENT_CHARS = 16;

const REDACTED = "<redacted>";
const PLAIN_SEGMENT = new RegExp(`^[A-Za-z0-9._-]{1,${MAX_KEPT_SEGMENT_CHARS}}$`);
const EXTENSION = /\.[A-Za-z0-9]{1,8}$/;
const LONG_WORD = new RegExp(`[A-Za-z0-9_+=-]{${LONG_WORD_CHARS},}`, "g");
/** A path inside a message: a slash, then anything up to a space or a quote. */
const PATH_IN_TEXT = /\/[^\s"'`]*/g;

/** The route shape of `path`: see above. */
export function routeShape(path: string, known: ReadonlySet<string> = NO_ROUTES): string {
  if (known.has(path)) return path;
  const q = path.indexOf("?");
  const bare = q < 0 ? path : path.slice(0, q);
  const segments = bare.split("/").slice(1);
  const first = segments[0] ?? "";
  if (!bare.startsWith("/") || first === "") return bare === "/" ? "/" : `/${REDACTED}`;
  const head = PLAIN_SEGMENT.test(first) ? first : REDACTED;
  const tail = segments.length > 1 ? `/${REDACTED}${EXTENSION.exec(segments.at(-1)!)?.[0] ?? ""}` : "";
  return `/${head}${tail}${q < 0 ? "" : "?…"}`;
}

/** `text` with its paths shaped, its secret-sized words redacted, and cut to size. */
export function redactText(text: string): string {
  // Cut first (with room for what the redactions add back), so that the regexes see a bounded text.
  const cut = text.length > 4 * MAX_UNTRUSTED_TEXT_CHARS ? text.slice(0, 4 * MAX_UNTRUSTED_TEXT_CHARS) : text;
  const redacted = cut.replace(PATH_IN_TEXT, (p) => routeShape(p)).replace(LONG_WORD, REDACTED);
  return redacted.length > MAX_UNTRUSTED_TEXT_CHARS || cut !== text
    ? `${redacted.slice(0, MAX_UNTRUSTED_TEXT_CHARS)}…`
    : redacted;
}

/**
 * Fields of a log line about unauthenticated input: `path` as a route shape, other text
 * redacted, numbers and booleans as they are, anything else (objects, arrays) by its type only.
 */
export function untrustedFields(
  fields: Readonly<Record<string, unknown>>,
  known: ReadonlySet<string> = NO_ROUTES,
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value === "string") out[key] = key === "path" ? routeShape(value, known) : redactText(value);
    else if (value === undefined || value === null || typeof value === "number" || typeof value === "boolean")
      out[key] = value;
    else out[key] = `[${typeof value}]`;
  }
  return out;
}

const NO_ROUTES: ReadonlySet<string> = new Set();
