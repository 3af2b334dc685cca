/**
 * The install route's HTTP without sockets: the head parser recognising a GET beside CONNECT
 * (only when asked to), under the same limits, and the answers the route writes.
 */
import { describe, expect, it } from "vitest";
import { formatInstallResponse, outcomeForRefusal } from "../../lib/server/install/install-response.js";
import { INSTALL_PATH } from "../../lib/server/install/install-route.js";
import { chooseWithInstall } from "../../lib/server/listeners/agent-listener.js";
import { generateToken } from "../../lib/tenancy/tokens.js";
import {
  ConnectHeadParser,
  MAX_GET_TARGET_LENGTH,
  type ParseResult,
} from "../../lib/transport/http-connect-parser.js";

const parser = (allowGet = true, maxHeaderBytes = 16_384) =>
  new ConnectHeadParser({ maxHeaderBytes, maxHeaders: 64, allowGet });

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as { code: string }).code;
  }
  return "accepted";
}

const TOKEN = generateToken("install", "acme").token;
const GET = `GET /v1/install/${TOKEN}.yaml HTTP/1.1\r\nHost: gw.example:8132\r\nUser-Agent: kubectl\r\n\r\n`;

describe("parsing a GET beside CONNECT", () => {
  it("recognises GET with an origin-form path when allowed, CONNECT as before", () => {
    const r = parser().push(Buffer.from(GET));
    expect(r.kind).toBe("get");
    const get = r as Extract<ParseResult, { kind: "get" }>;
    expect(get.request.path).toBe(`/v1/install/${TOKEN}.yaml`);
    expect(get.request.headers.get("user-agent")).toEqual(["kubectl"]);
    const connect = parser().push(Buffer.from("CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 10.0.0.1:443\r\n\r\n"));
    expect(connect.kind).toBe("complete");
  });

  it("still refuses GET with 405 where it is not served, and other methods everywhere", () => {
    expect(codeOf(() => parser(false).push(Buffer.from(GET)))).toBe("ERR_METHOD_NOT_ALLOWED");
    expect(codeOf(() => parser().push(Buffer.from("POST /v1/install/x.yaml HTTP/1.1\r\n")))).toBe(
      "ERR_METHOD_NOT_ALLOWED",
    );
    expect(codeOf(() => parser().push(Buffer.from("HEAD / HTTP/1.1\r\n")))).toBe("ERR_METHOD_NOT_ALLOWED");
  });

  it.each([
    ["absolute-form", "GET https://gw/v1/install/x.yaml HTTP/1.1\r\n"],
    ["asterisk-form", "GET * HTTP/1.1\r\n"],
    ["authority-form", "GET gw:8132 HTTP/1.1\r\n"],
    ["a space in the path", "GET /v1/ins tall HTTP/1.1\r\n"],
    ["two spaces", "GET  /v1 HTTP/1.1\r\n"],
    ["a control byte", "GET /v1/\x01 HTTP/1.1\r\n"],
    ["a fragment", "GET /v1#x HTTP/1.1\r\n"],
    ["HTTP/2 text", "GET / HTTP/2.0\r\n"],
    ["a bare LF", "GET / HTTP/1.1\n"],
    ["no Host (HTTP/1.1)", "GET / HTTP/1.1\r\n\r\n"],
    ["a folded header", "GET / HTTP/1.1\r\nHost: x\r\n y\r\n\r\n"],
    ["a target past the limit", `GET /${"a".repeat(MAX_GET_TARGET_LENGTH)} HTTP/1.1\r\n`],
  ])("refuses %s with 400", (_what, head) => {
    expect(codeOf(() => parser().push(Buffer.from(head)))).toBe("ERR_BAD_REQUEST");
  });

  it("cuts off a head past maxHeaderBytes (431) before its end arrives", () => {
    const p = parser(true, 1024);
    expect(
      codeOf(() => p.push(Buffer.from(`GET /${"a".repeat(900)} HTTP/1.1\r\nX: ${"b".repeat(200)}`))),
    ).toBe("ERR_HEADERS_TOO_LARGE");
  });

  it("assembles a head trickled one byte at a time", () => {
    const p = parser();
    const bytes = Buffer.from(GET);
    let r: ParseResult = { kind: "incomplete" };
    for (let i = 0; i < bytes.length; i++) {
      r = p.push(bytes.subarray(i, i + 1));
      if (i < bytes.length - 1) expect(r.kind).toBe("incomplete");
    }
    expect(r.kind).toBe("get");
  });

  it("hands back what follows the head (a body the route refuses) without reading it as headers", () => {
    const r = parser().push(Buffer.from(`GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello`));
    expect(r.kind).toBe("get");
    const get = r as Extract<ParseResult, { kind: "get" }>;
    expect(get.rest.toString()).toBe("hello");
    expect(get.request.headers.get("content-length")).toEqual(["5"]);
  });
});

describe("the install route's path and answers", () => {
  it("matches the token's path only", () => {
    expect(INSTALL_PATH.exec(`/v1/install/${TOKEN}.yaml`)?.[1]).toBe(TOKEN);
    for (const p of [
      "/v1/install/",
      "/v1/install/.yaml",
      `/v1/install/${TOKEN}.yml`,
      `/v1/install/${TOKEN}.yaml?x=1`,
      "/v1/install/a/b.yaml",
    ]) {
      expect(INSTALL_PATH.exec(p)).toBeNull();
    }
  });

  it("answers 404 to what may never have existed, 410 to what worked once or could have", () => {
    expect(["malformed", "unknown", "revoked"].map((r) => outcomeForRefusal(r as "unknown"))).toEqual([
      "not_found",
      "not_found",
      "not_found",
    ]);
    expect(outcomeForRefusal("expired")).toBe("gone");
    expect(outcomeForRefusal("used")).toBe("gone");
  });

  it("writes complete, uncacheable answers that close the connection", () => {
    const ok = formatInstallResponse("ok", "apiVersion: v1\n").toString();
    expect(ok).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(ok).toContain("Content-Type: application/yaml; charset=utf-8\r\n");
    expect(ok).toContain("Content-Length: 15\r\n");
    expect(ok).toContain("Cache-Control: no-store\r\n");
    expect(ok).toContain("Connection: close\r\n");
    expect(ok.endsWith("\r\n\r\napiVersion: v1\n")).toBe(true);
    const gone = formatInstallResponse("gone").toString();
    expect(gone).toMatch(/^HTTP\/1\.1 410 Gone\r\n/);
    expect(gone).toContain("Content-Type: text/plain");
    expect(formatInstallResponse("busy").toString()).toContain("Retry-After: 1\r\n");
  });
});

describe("ALPN with the install route on", () => {
  it("gives http/1.1 to clients that offer it beside h2 (kubectl, curl), h2 to gRPC clients", () => {
    expect(chooseWithInstall(["h2", "http/1.1"])).toBe("http/1.1");
    expect(chooseWithInstall(["h2"])).toBe("h2");
    expect(chooseWithInstall(["kgw-tunnel/1", "h2"])).toBe("kgw-tunnel/1");
    expect(chooseWithInstall(["spdy/3"])).toBeUndefined();
  });
});
