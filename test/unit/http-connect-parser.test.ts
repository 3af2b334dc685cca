import { describe, expect, it } from "vitest";
import {
  BadRequestError,
  type GatewayError,
  HeadersTooLargeError,
  httpStatusFor,
  MethodNotAllowedError,
} from "../../lib/errors.js";
import {
  ConnectHeadParser,
  type ConnectRequest,
  formatConnectResponse,
  type ParseResult,
} from "../../lib/transport/http-connect-parser.js";

const LIMITS = { maxHeaderBytes: 16 * 1024, maxHeaders: 100 };

// Byte-for-byte what kube-apiserver's EgressSelector HTTPConnect dialer writes.
const KUBE_HEAD = "CONNECT 10.0.0.5:10250 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

function parse(head: string | Buffer, limits = LIMITS): ParseResult {
  return new ConnectHeadParser(limits).push(typeof head === "string" ? Buffer.from(head, "latin1") : head);
}

function parseComplete(head: string | Buffer): { request: ConnectRequest; rest: Buffer } {
  const result = parse(head);
  if (result.kind !== "complete") throw new Error(`expected a complete head, got ${result.kind}`);
  return result;
}

function connect(target: string, headers = "Host: example\r\n"): string {
  return `CONNECT ${target} HTTP/1.1\r\n${headers}\r\n`;
}

/** Runs `fn` once (parsers are stateful), asserts it threw a `cls`, and returns that error. */
function catchError<T extends GatewayError>(fn: () => unknown, cls: new (...args: never[]) => T): T {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(cls);
  return caught as T;
}

describe("ConnectHeadParser: kube-apiserver HTTPConnect requests", () => {
  it("parses the exact request kube-apiserver sends", () => {
    const { request, rest } = parseComplete(KUBE_HEAD);
    expect(request).toEqual({
      method: "CONNECT",
      target: "10.0.0.5:10250",
      host: "10.0.0.5",
      port: 10250,
      httpVersion: "1.1",
      headers: new Map([["host", ["127.0.0.1"]]]),
    });
    expect(rest.length).toBe(0);
  });

  it("collects headers with lower-cased names, trimmed values and repeats in order", () => {
    const { request } = parseComplete(
      connect(
        "node-1:10250",
        "HOST: 127.0.0.1\r\nUser-Agent:  kube-apiserver/v1.31 \t\r\nX-A: 1\r\nx-a: 2\r\n",
      ),
    );
    expect(request.headers.get("host")).toEqual(["127.0.0.1"]);
    expect(request.headers.get("user-agent")).toEqual(["kube-apiserver/v1.31"]);
    expect(request.headers.get("x-a")).toEqual(["1", "2"]);
  });

  it("gives the same result when the head arrives one byte at a time", () => {
    const whole = parseComplete(KUBE_HEAD);
    const parser = new ConnectHeadParser(LIMITS);
    const bytes = Buffer.from(KUBE_HEAD);
    for (let i = 0; i < bytes.length - 1; i++) {
      expect(parser.push(bytes.subarray(i, i + 1))).toEqual({ kind: "incomplete" });
    }
    expect(parser.push(bytes.subarray(bytes.length - 1))).toEqual({ kind: "complete", ...whole });
  });

  it("gives the same result for every two-chunk split, with pipelined bytes following", () => {
    const tunneled = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x0d, 0x0a, 0x0d, 0x0a, 0xff]);
    const input = Buffer.concat([Buffer.from(KUBE_HEAD), tunneled]);
    for (let split = 0; split <= input.length; split++) {
      const parser = new ConnectHeadParser(LIMITS);
      let result = parser.push(input.subarray(0, split));
      if (result.kind === "incomplete") result = parser.push(input.subarray(split));
      expect(result.kind).toBe("complete");
      if (result.kind !== "complete") return;
      expect(result.request.target).toBe("10.0.0.5:10250");
      // `rest` is what followed the head within the chunk that completed it; later chunks are
      // never pushed because the caller switches to tunnel mode.
      const expectedRest = split >= KUBE_HEAD.length ? input.subarray(KUBE_HEAD.length, split) : tunneled;
      expect(result.rest.equals(expectedRest)).toBe(true);
    }
  });

  it("returns tunneled bytes pipelined right after the head exactly, including CRLFs and NULs", () => {
    const tunneled = Buffer.from("\r\n\r\n\0GET / HTTP/1.1\r\n\r\n\x00\xff", "latin1");
    const { rest } = parseComplete(Buffer.concat([Buffer.from(KUBE_HEAD), tunneled]));
    expect(rest.equals(tunneled)).toBe(true);
  });

  it("does not alias caller buffers it keeps between pushes", () => {
    const parser = new ConnectHeadParser(LIMITS);
    const reused = Buffer.from("CONNECT 10.0.0.5:1");
    parser.push(reused);
    reused.fill(0x41);
    const result = parser.push(Buffer.from("0250 HTTP/1.1\r\nHost: x\r\n\r\n"));
    expect(result.kind === "complete" && result.request.port).toBe(10250);
  });

  it("accepts a bracketed IPv6 target and strips the brackets from host", () => {
    const { request } = parseComplete(connect("[fd00::1:5]:10250"));
    expect(request).toMatchObject({ target: "[fd00::1:5]:10250", host: "fd00::1:5", port: 10250 });
    expect(parseComplete(connect("[::1]:443")).request.host).toBe("::1");
  });

  it("accepts a DNS host name target", () => {
    const { request } = parseComplete(connect("ip-10-0-0-5.ec2.internal:10250"));
    expect(request).toMatchObject({ host: "ip-10-0-0-5.ec2.internal", port: 10250 });
    expect(parseComplete(connect("localhost:1")).request.port).toBe(1);
    expect(parseComplete(connect("svc:65535")).request.port).toBe(65535);
  });

  it("accepts a fully qualified name with its trailing dot, as sent (the policy judges it without)", () => {
    const { request } = parseComplete(connect("kubernetes.default.svc.cluster.local.:443"));
    expect(request).toMatchObject({ host: "kubernetes.default.svc.cluster.local.", port: 443 });
  });

  it("accepts HTTP/1.0, which does not require Host", () => {
    const { request } = parseComplete("CONNECT 10.0.0.5:22 HTTP/1.0\r\n\r\n");
    expect(request.httpVersion).toBe("1.0");
    expect(request.headers.size).toBe(0);
  });

  it("ignores empty lines before the request line (RFC 7230 §3.5)", () => {
    expect(parseComplete(`\r\n\r\n${KUBE_HEAD}`).request.port).toBe(10250);
  });

  it("reports incomplete until the terminating blank line arrives", () => {
    const parser = new ConnectHeadParser(LIMITS);
    expect(parser.push(Buffer.alloc(0))).toEqual({ kind: "incomplete" });
    expect(parser.push(Buffer.from("CONNECT a:1 HTTP/1.1\r\nHost: a\r\n"))).toEqual({ kind: "incomplete" });
    expect(parser.push(Buffer.from("\r\n")).kind).toBe("complete");
  });

  it("refuses further input once the head is complete", () => {
    const parser = new ConnectHeadParser(LIMITS);
    parser.push(Buffer.from(KUBE_HEAD));
    expect(() => parser.push(Buffer.from("x"))).toThrow(/after the head/);
  });
});

describe("ConnectHeadParser: methods other than CONNECT", () => {
  it("rejects GET with 405 as soon as the request line is complete", () => {
    const parser = new ConnectHeadParser(LIMITS);
    const err = catchError(
      () => parser.push(Buffer.from("GET /api HTTP/1.1\r\nHost: x")),
      MethodNotAllowedError,
    );
    expect(err.code).toBe("ERR_METHOD_NOT_ALLOWED");
    expect(err.method).toBe("GET");
    expect(httpStatusFor(err)).toBe(405);
  });

  it("rejects a POST before its large body or headers are buffered", () => {
    const parser = new ConnectHeadParser(LIMITS);
    expect(parser.push(Buffer.from("POST /upload HTTP/1.1"))).toEqual({ kind: "incomplete" });
    expect(() => parser.push(Buffer.from("\r\n"))).toThrow(MethodNotAllowedError);
  });

  it("treats lowercase 'connect' as a valid token that is not CONNECT (405)", () => {
    const err = catchError(() => parse("connect 10.0.0.5:10250 HTTP/1.1\r\n\r\n"), MethodNotAllowedError);
    expect(err.method).toBe("connect");
  });
});

describe("ConnectHeadParser: malformed request lines are 400", () => {
  const cases: Array<[string, string]> = [
    ["missing version", "CONNECT 10.0.0.5:10250"],
    ["two spaces after method", "CONNECT  10.0.0.5:10250 HTTP/1.1"],
    ["two spaces before version", "CONNECT 10.0.0.5:10250  HTTP/1.1"],
    ["trailing space", "CONNECT 10.0.0.5:10250 HTTP/1.1 "],
    ["tab separator", "CONNECT\t10.0.0.5:10250 HTTP/1.1"],
    ["method is not a token", "CON(NECT 10.0.0.5:10250 HTTP/1.1"],
    ["HTTP/2.0", "CONNECT 10.0.0.5:10250 HTTP/2.0"],
    ["HTTP/1.2", "CONNECT 10.0.0.5:10250 HTTP/1.2"],
    ["lowercase http name", "CONNECT 10.0.0.5:10250 http/1.1"],
    ["origin-form target", "CONNECT /path HTTP/1.1"],
    ["absolute-form target", "CONNECT http://10.0.0.5:10250 HTTP/1.1"],
    ["port 0", "CONNECT 10.0.0.5:0 HTTP/1.1"],
    ["port 65536", "CONNECT 10.0.0.5:65536 HTTP/1.1"],
    ["port abc", "CONNECT 10.0.0.5:abc HTTP/1.1"],
    ["signed port", "CONNECT 10.0.0.5:+80 HTTP/1.1"],
    ["negative port", "CONNECT 10.0.0.5:-80 HTTP/1.1"],
    ["missing port", "CONNECT 10.0.0.5 HTTP/1.1"],
    ["empty port", "CONNECT 10.0.0.5: HTTP/1.1"],
    ["empty host", "CONNECT :80 HTTP/1.1"],
    ["octet out of range", "CONNECT 999.1.1.1:80 HTTP/1.1"],
    ["octal-looking octet", "CONNECT 010.0.0.1:80 HTTP/1.1"],
    ["short IPv4 form", "CONNECT 127.1:80 HTTP/1.1"],
    ["integer IPv4 form", "CONNECT 2130706433:80 HTTP/1.1"],
    ["hex IPv4 form", "CONNECT 0x7f000001:80 HTTP/1.1"],
    ["numeric last label", "CONNECT example.127:80 HTTP/1.1"],
    ["userinfo", "CONNECT user@host:80 HTTP/1.1"],
    ["underscore in host", "CONNECT my_host:80 HTTP/1.1"],
    ["empty label", "CONNECT a..b:80 HTTP/1.1"],
    ["trailing dot on an address", "CONNECT 127.0.0.1.:80 HTTP/1.1"],
    ["octal IPv4 form", "CONNECT 0251.0376.0251.0376:80 HTTP/1.1"],
    ["IPv4-compatible IPv6", "CONNECT [::127.0.0.1]:80 HTTP/1.1"],
    ["label over 63 chars", `CONNECT ${"a".repeat(64)}.com:80 HTTP/1.1`],
    ["name over 253 chars", `CONNECT ${Array(64).fill("abc").join(".")}:80 HTTP/1.1`],
    ["leading hyphen", "CONNECT -host:80 HTTP/1.1"],
    ["unbracketed IPv6", "CONNECT ::1:80 HTTP/1.1"],
    ["IPv6 without port", "CONNECT [::1] HTTP/1.1"],
    ["IPv6 missing bracket", "CONNECT [::1:80 HTTP/1.1"],
    ["invalid IPv6", "CONNECT [fd00::1::2]:80 HTTP/1.1"],
    ["IPv6 zone ID", "CONNECT [fe80::1%eth0]:80 HTTP/1.1"],
    ["IPv4 in brackets", "CONNECT [10.0.0.5]:80 HTTP/1.1"],
  ];

  it.each(cases)("%s: %j", (_name, requestLine) => {
    const err = catchError(() => parse(`${requestLine}\r\nHost: x\r\n\r\n`), BadRequestError);
    expect(err.code).toBe("ERR_BAD_REQUEST");
    expect(httpStatusFor(err)).toBe(400);
  });

  it("names the target in the message", () => {
    expect(() => parse("CONNECT /path HTTP/1.1\r\n\r\n")).toThrow(/invalid CONNECT target "\/path"/);
  });
});

describe("ConnectHeadParser: head size and header count limits", () => {
  it("throws on the chunk that crosses the byte limit, without waiting for a terminator", () => {
    const parser = new ConnectHeadParser(LIMITS);
    expect(parser.push(Buffer.from("CONNECT 10.0.0.5:10250 HTTP/1.1\r\n")).kind).toBe("incomplete");
    const line = Buffer.from(`X-Filler: ${"a".repeat(1000)}\r\n`);
    const megabyte = Array.from({ length: 1024 }, () => line);
    let pushed = 34;
    let thrown: unknown;
    for (const chunk of megabyte) {
      try {
        parser.push(chunk);
        pushed += chunk.length;
      } catch (err) {
        thrown = err;
        break;
      }
    }
    expect(thrown).toBeInstanceOf(HeadersTooLargeError);
    expect((thrown as HeadersTooLargeError).code).toBe("ERR_HEADERS_TOO_LARGE");
    expect((thrown as HeadersTooLargeError).limit).toBe(LIMITS.maxHeaderBytes);
    // It threw on the first chunk that crossed 16 KiB, long before the megabyte was sent.
    expect(pushed).toBeLessThanOrEqual(LIMITS.maxHeaderBytes);
    expect(pushed + line.length).toBeGreaterThan(LIMITS.maxHeaderBytes);
  });

  it("throws on a single 1 MiB chunk with no line breaks at all", () => {
    const parser = new ConnectHeadParser(LIMITS);
    const err = catchError(() => parser.push(Buffer.alloc(1024 * 1024, 0x61)), HeadersTooLargeError);
    expect(httpStatusFor(err)).toBe(431);
  });

  it("counts bytes up to and including CRLFCRLF, but not pipelined bytes", () => {
    const size = Buffer.byteLength(KUBE_HEAD);
    const exact = { maxHeaderBytes: size, maxHeaders: 10 };
    const result = parse(Buffer.concat([Buffer.from(KUBE_HEAD), Buffer.alloc(4096)]), exact);
    expect(result.kind === "complete" && result.rest.length).toBe(4096);
    expect(() => parse(KUBE_HEAD, { maxHeaderBytes: size - 1, maxHeaders: 10 })).toThrow(
      HeadersTooLargeError,
    );
  });

  it("counts leading empty lines toward the limit", () => {
    const blank = "\r\n".repeat(10_000);
    expect(() => parse(blank + KUBE_HEAD)).toThrow(HeadersTooLargeError);
  });

  it("rejects more than maxHeaders header fields", () => {
    const limits = { maxHeaderBytes: 16 * 1024, maxHeaders: 3 };
    const fields = (n: number) => Array.from({ length: n }, (_, i) => `X-${i}: v\r\n`).join("");
    expect(parse(connect("a:1", `Host: a\r\n${fields(2)}`), limits).kind).toBe("complete");
    const err = catchError(
      () => parse(connect("a:1", `Host: a\r\n${fields(3)}`), limits),
      HeadersTooLargeError,
    );
    expect(err.code).toBe("ERR_HEADERS_TOO_LARGE");
    expect(err.message).toMatch(/more than 3 header fields/);
  });

  it("validates its options", () => {
    expect(() => new ConnectHeadParser({ maxHeaderBytes: 0, maxHeaders: 1 })).toThrow(RangeError);
    expect(() => new ConnectHeadParser({ maxHeaderBytes: 1, maxHeaders: Number.NaN })).toThrow(RangeError);
  });
});

describe("ConnectHeadParser: framing attacks and malformed header fields are 400", () => {
  const cases: Array<[string, string]> = [
    ["bare LF after request line", "CONNECT a:1 HTTP/1.1\nHost: a\r\n\r\n"],
    ["bare LF terminator", "CONNECT a:1 HTTP/1.1\r\nHost: a\n\n"],
    ["bare CR inside a header", "CONNECT a:1 HTTP/1.1\r\nHost: a\rX: y\r\n\r\n"],
    ["obs-fold with space", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX-Long: one\r\n two\r\n\r\n"],
    ["obs-fold with tab", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX-Long: one\r\n\ttwo\r\n\r\n"],
    ["NUL in header value", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n"],
    ["escape in header value", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX: \x1b[31m\r\n\r\n"],
    ["DEL in header value", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n"],
    ["space before colon", "CONNECT a:1 HTTP/1.1\r\nHost : a\r\n\r\n"],
    ["missing colon", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n"],
    ["empty field name", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n"],
    ["non-token field name", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nX(y): v\r\n\r\n"],
    ["duplicate Host", "CONNECT a:1 HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n"],
    ["HTTP/1.1 without Host", "CONNECT a:1 HTTP/1.1\r\nUser-Agent: x\r\n\r\n"],
    ["NUL in request line", "CONNECT a:1\0 HTTP/1.1\r\nHost: a\r\n\r\n"],
  ];

  it.each(cases)("%s", (_name, head) => {
    const err = catchError(() => parse(head), BadRequestError);
    expect(err.code).toBe("ERR_BAD_REQUEST");
  });

  it("rejects bare LF immediately instead of buffering up to the limit", () => {
    const parser = new ConnectHeadParser(LIMITS);
    expect(() => parser.push(Buffer.from("CONNECT a:1 HTTP/1.1\n"))).toThrow(/bare LF/);
  });

  it("allows tabs and obs-text (bytes >= 0x80) in header values", () => {
    const { request } = parseComplete(connect("a:1", "Host: a\r\nX: a\tb \xe9\r\n"));
    expect(request.headers.get("x")).toEqual(["a\tb \xe9"]);
  });

  it("refuses further input after an error", () => {
    const parser = new ConnectHeadParser(LIMITS);
    expect(() => parser.push(Buffer.from("GET / HTTP/1.1\r\n"))).toThrow(MethodNotAllowedError);
    expect(() => parser.push(Buffer.from("\r\n"))).toThrow(/after the head/);
  });

  it("handles a header value made of many spaces in linear time", () => {
    const head = connect("a:1", `Host: a\r\nX: ${" ".repeat(15_000)}x${" ".repeat(1000)}\r\n`);
    expect(parseComplete(head).request.headers.get("x")).toEqual(["x"]);
  });
});

describe("formatConnectResponse", () => {
  const text = (b: Buffer) => b.toString("latin1");

  it("answers a successful CONNECT with 200 Connection established and no body framing", () => {
    expect(text(formatConnectResponse(200))).toBe("HTTP/1.1 200 Connection established\r\n\r\n");
  });

  it("closes error responses with an empty body", () => {
    expect(text(formatConnectResponse(503))).toBe(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
  });

  it("advertises Allow: CONNECT on 405", () => {
    expect(text(formatConnectResponse(405))).toBe(
      "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\nAllow: CONNECT\r\n\r\n",
    );
  });

  it.each([
    [400, "Bad Request"],
    [401, "Unauthorized"],
    [403, "Forbidden"],
    [407, "Proxy Authentication Required"],
    [408, "Request Timeout"],
    [429, "Too Many Requests"],
    [431, "Request Header Fields Too Large"],
    [500, "Internal Server Error"],
    [502, "Bad Gateway"],
    [504, "Gateway Timeout"],
  ])("uses the standard reason phrase for %i", (status, reason) => {
    expect(text(formatConnectResponse(status))).toMatch(new RegExp(`^HTTP/1\\.1 ${status} ${reason}\\r\\n`));
  });

  it("uses a custom reason and appends extra headers", () => {
    const out = text(
      formatConnectResponse(407, "Auth Please", {
        "Proxy-Authenticate": 'Basic realm="kgw"',
        "Retry-After": "5",
      }),
    );
    expect(out).toBe(
      "HTTP/1.1 407 Auth Please\r\nContent-Length: 0\r\nConnection: close\r\n" +
        'Proxy-Authenticate: Basic realm="kgw"\r\nRetry-After: 5\r\n\r\n',
    );
  });

  it("lets extra headers replace defaults of the same name", () => {
    expect(text(formatConnectResponse(503, undefined, { connection: "keep-alive" }))).toBe(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nconnection: keep-alive\r\n\r\n",
    );
  });

  it("round-trips every formatted error status through httpStatusFor's table", () => {
    expect(text(formatConnectResponse(httpStatusFor(new MethodNotAllowedError("GET"))))).toContain(
      "Allow: CONNECT",
    );
  });

  it.each([
    [
      "CRLF in a header value",
      () => formatConnectResponse(400, undefined, { "X-Why": "a\r\nSet-Cookie: x" }),
    ],
    ["LF in a header value", () => formatConnectResponse(400, undefined, { "X-Why": "a\nb" })],
    ["NUL in a header value", () => formatConnectResponse(400, undefined, { "X-Why": "a\0b" })],
    ["CRLF in the reason", () => formatConnectResponse(400, "Bad\r\n\r\ninjected")],
    ["non-token header name", () => formatConnectResponse(400, undefined, { "X Bad": "v" })],
    ["Content-Length on 200", () => formatConnectResponse(200, undefined, { "Content-Length": "0" })],
    [
      "Transfer-Encoding on 200",
      () => formatConnectResponse(200, undefined, { "Transfer-Encoding": "chunked" }),
    ],
  ])("throws TypeError for %s", (_name, fn) => {
    expect(fn).toThrow(TypeError);
  });

  it("throws RangeError for statuses that are not a final response", () => {
    expect(() => formatConnectResponse(101)).toThrow(RangeError);
    expect(() => formatConnectResponse(600)).toThrow(RangeError);
    expect(() => formatConnectResponse(200.5)).toThrow(RangeError);
  });
});
