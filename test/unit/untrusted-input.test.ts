/**
 * What a log line keeps of text an unauthenticated peer sent (lib/observability/untrusted-input.ts)
 * and the refusal log every such line goes through.
 */
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { createLogger } from "../../lib/observability/logger.js";
import { refusalLog } from "../../lib/observability/refusal-log.js";
import {
  MAX_UNTRUSTED_TEXT_CHARS,
  redactText,
  routeShape,
  untrustedFields,
} from "../../lib/observability/untrusted-input.js";
import { generateToken } from "../../lib/tenancy/tokens.js";

const TOKEN = generateToken("install", "acme").token;

describe("the route shape of a path", () => {
  it.each([
    [`/v1/install/${TOKEN}.yaml`, "/v1/<redacted>.yaml"],
    [`/v1/install/${TOKEN}.yaml?x=1`, "/v1/<redacted>.yaml?…"],
    [`/${TOKEN}`, "/<redacted>"],
    ["/login/hunter2", "/login/<redacted>"],
    ["/healthz", "/healthz"],
    ["/", "/"],
    ["", "/<redacted>"],
    ["*", "/<redacted>"],
    [`/${"a".repeat(8192)}`, "/<redacted>"],
  ])("%j is logged as %j", (path, shape) => {
    expect(routeShape(path.slice(0, 9000))).toBe(shape);
  });

  it("keeps the server's own routes whole", () => {
    expect(routeShape("/ProxyService/Proxy", new Set(["/ProxyService/Proxy"]))).toBe("/ProxyService/Proxy");
  });
});

describe("other text from a peer", () => {
  it("has its paths shaped, its secret-sized words redacted, and is cut to size", () => {
    expect(redactText(`malformed request line "GET /v1/install/${TOKEN}.yaml  HTTP/1.1"`)).toBe(
      'malformed request line "GET /v1/<redacted>.yaml  HTTP/1.1"',
    );
    expect(redactText(`invalid CONNECT target "${TOKEN.slice(0, 64)}…": invalid host name`)).toBe(
      'invalid CONNECT target "<redacted>…": invalid host name',
    );
    expect(redactText("bare CR in request head")).toBe("bare CR in request head");
    const long = redactText("word ".repeat(10_000));
    expect(long.length).toBe(MAX_UNTRUSTED_TEXT_CHARS + 1);
    expect(long.endsWith("…")).toBe(true);
  });

  it("keeps numbers and booleans, and only the type of anything structured", () => {
    expect(
      untrustedFields({ path: `/v1/install/${TOKEN}.yaml`, status: 405, ok: false, h: { a: 1 } }),
    ).toEqual({
      path: "/v1/<redacted>.yaml",
      status: 405,
      ok: false,
      h: "[object]",
    });
  });
});

describe("the refusal log", () => {
  it("writes redacted fields within its budget", () => {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split("\n")) if (l) lines.push(JSON.parse(l));
        cb();
      },
    });
    const log = createLogger({ level: "info", name: "t", destination });
    const refused = refusalLog(log, { perSecond: 2, now: () => 0 });
    for (let i = 0; i < 5; i++) refused({ path: `/v1/install/${TOKEN}.yaml` }, "refused");
    expect(lines).toHaveLength(2);
    expect(JSON.stringify(lines)).not.toContain(TOKEN.slice(-64, -40));
    expect(lines[0]).toMatchObject({ path: "/v1/<redacted>.yaml", msg: "refused" });
  });

  it("keeps the server's own values whole (a long error code, a credential id) and redacts the peer's", () => {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk, _enc, cb) {
        for (const l of String(chunk).split("\n")) if (l) lines.push(JSON.parse(l));
        cb();
      },
    });
    const refused = refusalLog(createLogger({ level: "info", name: "t", destination }));
    refused({ err: `bad ${TOKEN}` }, "refused a caller", {
      code: "ERR_PROXY_AUTH_REQUIRED",
      credential: "cert:00AABBCCDDEEFF00112233445566778899AABBCC",
    });
    expect(lines[0]).toMatchObject({
      code: "ERR_PROXY_AUTH_REQUIRED",
      credential: "cert:00AABBCCDDEEFF00112233445566778899AABBCC",
      err: "bad <redacted>",
    });
  });
});
