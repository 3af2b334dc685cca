/**
 * Socket-free parser for the CONNECT head kube-apiserver's EgressSelector `HTTPConnect` mode sends.
 * Only the unfinished line is buffered and each byte is scanned once, however reads split the head.
 * With `allowGet`, a GET with an origin-form target is recognised too (the one-line install,
 * lib/server/install/), under the same limits; every other method is still refused on the
 * request line.
 */
import { parseTargetAddress } from "../egress/target.js";
import { BadRequestError, HeadersTooLargeError, MethodNotAllowedError } from "../errors.js";

export interface ConnectRequest {
  method: string;
  /** The request-target exactly as sent, e.g. `10.0.0.5:10250` or `[::1]:443`. */
  target: string;
  /** Host without IPv6 brackets. */
  host: string;
  port: number;
  httpVersion: "1.0" | "1.1";
  /** Lower-cased field names; repeated fields keep every value in arrival order. */
  headers: Map<string, string[]>;
}

/** A GET with an origin-form target, parsed only with `allowGet`. */
export interface GetRequest {
  method: "GET";
  /** The origin-form target exactly as sent: `/`, then RFC 3986 path and query characters. */
  path: string;
  httpVersion: "1.0" | "1.1";
  /** Lower-cased field names; repeated fields keep every value in arrival order. */
  headers: Map<string, string[]>;
}

export type ParseResult =
  | { kind: "incomplete" }
  | { kind: "complete"; request: ConnectRequest; rest: Buffer }
  | { kind: "get"; request: GetRequest; rest: Buffer };

export interface ConnectHeadParserOptions {
  /** Limit on the head, counting bytes up to and including the terminating CRLFCRLF. */
  maxHeaderBytes: number;
  maxHeaders: number;
  /** Recognise `GET <origin-form> HTTP/1.x` as well as CONNECT (default: CONNECT only, 405). */
  allowGet?: boolean;
}

type RequestLine = Omit<ConnectRequest, "headers"> | Omit<GetRequest, "headers">;

/**
 * Longest GET target accepted. The install path is under 200 characters; a longer target is no
 * route of ours, and refusing it on the request line keeps it out of logs and lookups.
 */
export const MAX_GET_TARGET_LENGTH = 1024;
// RFC 3986 origin-form: absolute-path [ "?" query ]; pchar, "/" and "?" only (no fragment, no spaces).
const ORIGIN_FORM = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*$/;

const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HT = 0x09;
// RFC 7230 §3.2.6 tchar.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
// RFC 7230 §3.2 field-content / §3.1.2 reason-phrase: HTAB, SP, VCHAR, obs-text. Lines are decoded
// as latin1, so chars map 1:1 to octets and anything outside this set is a control byte (NUL, DEL...).
const FIELD_CHARS = /^[\t\x20-\x7e\x80-\xff]*$/;

export class ConnectHeadParser {
  readonly #maxHeaderBytes: number;
  readonly #maxHeaders: number;
  readonly #allowGet: boolean;
  #consumed = 0;
  /** Pieces of the current, not yet terminated line (copies, so callers may reuse their buffers). */
  #parts: Buffer[] = [];
  #prevCR = false;
  #requestLine: RequestLine | undefined;
  #headers = new Map<string, string[]>();
  #headerCount = 0;
  #finished = false;

  constructor(opts: ConnectHeadParserOptions) {
    if (!(opts.maxHeaderBytes >= 1 && opts.maxHeaders >= 1)) {
      throw new RangeError("maxHeaderBytes and maxHeaders must be at least 1");
    }
    this.#maxHeaderBytes = opts.maxHeaderBytes;
    this.#maxHeaders = opts.maxHeaders;
    this.#allowGet = opts.allowGet ?? false;
  }

  /** Feeds the next bytes read from the peer. Throws a GatewayError subclass on invalid input. */
  push(chunk: Buffer): ParseResult {
    if (this.#finished) throw new Error("ConnectHeadParser.push() called after the head completed or failed");
    try {
      return this.#scan(chunk);
    } catch (err) {
      this.#finished = true;
      throw err;
    }
  }

  #scan(chunk: Buffer): ParseResult {
    let lineStart = 0;
    for (let i = 0; i < chunk.length; i++) {
      // Checked per byte so a peer streaming an endless head is cut off at the limit, not after
      // we buffered whatever it managed to send in one read.
      if (this.#consumed >= this.#maxHeaderBytes) throw new HeadersTooLargeError(this.#maxHeaderBytes);
      this.#consumed++;
      const b = chunk[i];
      if (this.#prevCR) {
        // A CR that does not start CRLF lets two parsers disagree on where a line ends (smuggling).
        if (b !== LF) throw new BadRequestError("bare CR in request head");
        this.#prevCR = false;
        const line = Buffer.concat([...this.#parts, chunk.subarray(lineStart, i)]);
        this.#parts = [];
        lineStart = i + 1;
        if (this.#onLine(line.toString("latin1", 0, line.length - 1))) {
          this.#finished = true;
          const request = this.#complete();
          const rest = chunk.subarray(i + 1);
          return request.method === "GET"
            ? { kind: "get", request: request as GetRequest, rest }
            : { kind: "complete", request: request as ConnectRequest, rest };
        }
      } else if (b === LF) {
        // RFC 7230 §3.5 lets a server accept bare LF; we do not, for the same reason as bare CR.
        throw new BadRequestError("bare LF line ending in request head; CRLF is required");
      } else {
        this.#prevCR = b === CR;
      }
    }
    if (lineStart < chunk.length) this.#parts.push(Buffer.from(chunk.subarray(lineStart)));
    return { kind: "incomplete" };
  }

  /** Returns true when `line` is the empty line that ends the head. */
  #onLine(line: string): boolean {
    // RFC 7230 §3.5: servers SHOULD ignore empty lines before the request-line (still counted).
    if (this.#requestLine === undefined) {
      if (line !== "") this.#requestLine = parseRequestLine(line, this.#allowGet);
    } else if (line !== "") {
      this.#addHeader(line);
    } else {
      return true;
    }
    return false;
  }

  #addHeader(line: string): void {
    const first = line.charCodeAt(0);
    // RFC 7230 §3.2.4: obs-fold must be rejected by servers that do not unfold; recipients that
    // disagree about folding disagree about header values.
    if (first === SP || first === HT) throw new BadRequestError("obsolete line folding in request head");
    if (++this.#headerCount > this.#maxHeaders) {
      const err = new HeadersTooLargeError(this.#maxHeaders);
      err.message = `request head has more than ${this.#maxHeaders} header fields`;
      throw err;
    }
    const colon = line.indexOf(":");
    const rawName = colon > 0 ? line.slice(0, colon) : line;
    // Token-only names also reject `Host :`, which RFC 7230 §3.2.4 makes a 400 (proxies disagree on it).
    if (colon <= 0 || !TOKEN.test(rawName))
      throw new BadRequestError(`invalid header name ${quote(rawName)}`);
    const name = rawName.toLowerCase();
    const value = trimOWS(line.slice(colon + 1));
    if (!FIELD_CHARS.test(value)) throw new BadRequestError(`control character in value of header ${name}`);
    // RFC 7230 §5.4: more than one Host is a 400; which one a backend honours is attacker-chosen.
    if (name === "host" && this.#headers.has("host")) throw new BadRequestError("duplicate Host header");
    const values = this.#headers.get(name);
    if (values === undefined) this.#headers.set(name, [value]);
    else values.push(value);
  }

  #complete(): ConnectRequest | GetRequest {
    const line = this.#requestLine!;
    // RFC 7230 §5.4: an HTTP/1.1 request without Host MUST get 400 (Go's server, which upstream
    // konnectivity uses, does the same).
    if (line.httpVersion === "1.1" && !this.#headers.has("host")) {
      throw new BadRequestError("HTTP/1.1 request is missing the Host header");
    }
    return { ...line, headers: this.#headers };
  }
}

function parseRequestLine(line: string, allowGet: boolean): RequestLine {
  const parts = line.split(" ");
  // RFC 7230 §3.1.1: exactly one SP between the three parts; lenient whitespace is a smuggling aid.
  if (parts.length !== 3 || parts.some((p) => p === "")) {
    throw new BadRequestError(`malformed request line ${quote(line)}; expected "CONNECT host:port HTTP/1.1"`);
  }
  const [method, target, version] = parts as [string, string, string];
  if (!TOKEN.test(method)) throw new BadRequestError(`invalid method ${quote(method)}`);
  // HTTP-name is case-sensitive (RFC 7230 §2.6); HTTP/2 and later never use this text framing.
  const match = /^HTTP\/1\.([01])$/.exec(version);
  if (match === null) throw new BadRequestError(`unsupported HTTP version ${quote(version)}`);
  const httpVersion = match[1] === "0" ? "1.0" : "1.1";
  if (method === "GET" && allowGet) return { method, path: parseOriginForm(target), httpVersion };
  // Decided on the request line alone so a large POST body is never buffered.
  if (method !== "CONNECT") throw new MethodNotAllowedError(method);
  const { host, port } = parseAuthority(target);
  return { method, target, host, port, httpVersion };
}

/** RFC 7230 §5.3.1 origin-form only: no absolute-form (we are no forward proxy), no asterisk. */
function parseOriginForm(target: string): string {
  if (target.length > MAX_GET_TARGET_LENGTH) {
    throw new BadRequestError(`request target longer than ${MAX_GET_TARGET_LENGTH} characters`);
  }
  if (!ORIGIN_FORM.test(target)) throw new BadRequestError(`invalid GET target ${quote(target)}`);
  return target;
}

/**
 * RFC 7231 §4.3.6: CONNECT uses authority-form only. The host is read by the one target parser
 * every frontend shares (lib/egress/target.ts): a dotted quad, IPv6 in brackets without a zone,
 * or an RFC 1123 name (a trailing dot allowed); other spellings of an address are refused.
 */
function parseAuthority(target: string): { host: string; port: number } {
  const parsed = parseTargetAddress(target);
  if (!parsed.ok) throw new BadRequestError(`invalid CONNECT target ${quote(target)}: ${parsed.reason}`);
  const host = target.startsWith("[")
    ? target.slice(1, target.indexOf("]"))
    : target.slice(0, target.indexOf(":"));
  return { host, port: parsed.value.port };
}

/** Index-based rather than a `[ \t]+$` regex, which backtracks quadratically on long runs of spaces. */
function trimOWS(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s.charCodeAt(start) === SP || s.charCodeAt(start) === HT)) start++;
  while (end > start && (s.charCodeAt(end - 1) === SP || s.charCodeAt(end - 1) === HT)) end--;
  return s.slice(start, end);
}

/** Peer-supplied text ends up in logs: keep it short and escaped. */
function quote(s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s);
}

const REASONS: Readonly<Record<number, string>> = {
  200: "Connection established",
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  405: "Method Not Allowed",
  407: "Proxy Authentication Required",
  408: "Request Timeout",
  429: "Too Many Requests",
  431: "Request Header Fields Too Large",
  500: "Internal Server Error",
  502: "Bad Gateway",
  503: "Service Unavailable",
  504: "Gateway Timeout",
};

/**
 * Response for a CONNECT request. Error responses carry `Content-Length` (of `body`, 0 without
 * one) and `Connection: close` so the client reads the whole body and does not reuse the socket.
 * Extra headers replace defaults of the same (case-insensitive) name. A 2xx takes no body.
 */
export function formatConnectResponse(
  status: number,
  reason?: string,
  extraHeaders: Record<string, string> = {},
  body?: { contentType: string; text: string },
): Buffer {
  // 1xx would leave the client waiting for a final response we never send.
  if (!Number.isInteger(status) || status < 200 || status > 599) {
    throw new RangeError(`status must be an integer in 200..599, got ${status}`);
  }
  const phrase = reason ?? REASONS[status] ?? "";
  // CR/LF in anything we write would let a caller-controlled string inject headers or a body.
  if (!FIELD_CHARS.test(phrase)) throw new TypeError("reason phrase must not contain CR, LF or controls");
  const headers = new Map<string, [string, string]>();
  if (body && status < 300) throw new TypeError("a 2xx CONNECT response takes no body");
  const bodyBytes = body ? Buffer.from(body.text, "utf8") : undefined;
  if (status >= 300) {
    if (body) headers.set("content-type", ["Content-Type", body.contentType]);
    headers.set("content-length", ["Content-Length", String(bodyBytes?.length ?? 0)]);
    headers.set("connection", ["Connection", "close"]);
  }
  if (status === 405) headers.set("allow", ["Allow", "CONNECT"]);
  for (const [name, value] of Object.entries(extraHeaders)) {
    if (!TOKEN.test(name)) throw new TypeError(`invalid header name ${quote(name)}`);
    if (!FIELD_CHARS.test(value)) throw new TypeError(`header ${name} must not contain CR, LF or controls`);
    headers.set(name.toLowerCase(), [name, value]);
  }
  // RFC 7230 §3.3.1-3.3.2: a 2xx to CONNECT switches to tunnel mode and MUST NOT carry a body
  // length; a client honouring one would swallow tunneled bytes as the "body".
  if (status < 300 && (headers.has("content-length") || headers.has("transfer-encoding"))) {
    throw new TypeError("a 2xx CONNECT response must not carry Content-Length or Transfer-Encoding");
  }
  let head = `HTTP/1.1 ${status} ${phrase}\r\n`;
  for (const [name, value] of headers.values()) head += `${name}: ${value}\r\n`;
  const headBytes = Buffer.from(`${head}\r\n`, "latin1");
  return bodyBytes ? Buffer.concat([headBytes, bodyBytes]) : headBytes;
}
