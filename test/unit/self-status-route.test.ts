/**
 * A tenant's GET /v1/status route without a listener (the listener's own limits are
 * status-api.test.ts's): at most MAX_SELF_STATUS_IN_FLIGHT answers under way on one instance,
 * the rest 503 with Retry-After and without asking anything; a peer that keeps sending after its
 * head is cut off; the answers' bytes.
 */
import type { Socket } from "node:net";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { UnauthenticatedError } from "../../lib/errors.js";
import { createLogger } from "../../lib/observability/logger.js";
import type { CallerAuthenticator } from "../../lib/server/policy/caller-auth.js";
import { formatSelfStatusResponse, type SelfStatus } from "../../lib/server/status/self-status-response.js";
import {
  createSelfStatusRoute,
  MAX_SELF_STATUS_DISCARDED_BYTES,
  MAX_SELF_STATUS_IN_FLIGHT,
} from "../../lib/server/status/self-status-route.js";
import type { GetRequest } from "../../lib/transport/http-connect-parser.js";

const log = createLogger({ name: "test", level: "silent" });
const open: PassThrough[] = [];

afterEach(() => {
  for (const s of open.splice(0)) s.destroy();
});

/** A socket the route writes its answer to; `answer()` is what it wrote. */
function fakeSocket() {
  const s = new PassThrough();
  open.push(s);
  const written: Buffer[] = [];
  const end = s.end.bind(s);
  (s as unknown as { end: (b: Buffer) => void }).end = (b: Buffer) => {
    written.push(b);
    end();
  };
  return { socket: s as unknown as Socket, stream: s, answer: () => Buffer.concat(written).toString("utf8") };
}

const request = (authorization?: string): GetRequest => ({
  method: "GET",
  path: "/v1/status",
  httpVersion: "1.1",
  headers: new Map(authorization ? [["authorization", [authorization]]] : []),
});

const acme: CallerAuthenticator = ({ authorization }) => {
  if (authorization[0] !== "Bearer acme") throw new UnauthenticatedError("no");
  return { tenant: "acme", principal: "token:0123456789abcdef", listener: "gateway" };
};

const status = (tenant: string): SelfStatus => ({
  apiVersion: "kgw.status/v1",
  generatedAt: "2026-12-05T12:00:00.000Z",
  partial: false,
  tenant: {
    tenant,
    agents: [],
    openTunnels: 0,
    recent: { windowMinutes: 15, dials: {}, failures: {} },
    lastError: null,
    credentials: [],
  },
});

describe("GET /v1/status, the route", () => {
  it(`answers at most ${MAX_SELF_STATUS_IN_FLIGHT} at once; the next gets 503 + Retry-After without being asked`, async () => {
    const pending: ((s: SelfStatus) => void)[] = [];
    let asked = 0;
    const route = createSelfStatusRoute({
      authenticate: acme,
      statusOf: () => {
        asked++;
        return new Promise((resolve) => pending.push(resolve));
      },
      log,
    });
    const held = Array.from({ length: MAX_SELF_STATUS_IN_FLIGHT }, () => fakeSocket());
    for (const h of held) route(h.socket, request("Bearer acme"), Buffer.alloc(0));
    const over = fakeSocket();
    route(over.socket, request("Bearer acme"), Buffer.alloc(0));
    expect(over.answer()).toMatch(/^HTTP\/1\.1 503 /);
    expect(over.answer()).toContain("Retry-After: 1");
    expect(over.answer()).not.toContain("X-Kgw-Error-Code");
    expect(asked).toBe(MAX_SELF_STATUS_IN_FLIGHT);
    for (const resolve of pending) resolve(status("acme"));
    await new Promise((r) => setImmediate(r));
    for (const h of held) expect(h.answer()).toMatch(/^HTTP\/1\.1 200 /);
    // Capacity is back once they answered.
    const next = fakeSocket();
    route(next.socket, request("Bearer acme"), Buffer.alloc(0));
    expect(asked).toBe(MAX_SELF_STATUS_IN_FLIGHT + 1);
  });

  it("an unauthenticated request is answered 401 without asking for any status", () => {
    let asked = 0;
    const route = createSelfStatusRoute({
      authenticate: acme,
      statusOf: async (t) => {
        asked++;
        return status(t);
      },
      log,
    });
    const s = fakeSocket();
    route(s.socket, request("Bearer globex"), Buffer.alloc(0));
    expect(s.answer()).toMatch(/^HTTP\/1\.1 401 /);
    expect(asked).toBe(0);
  });

  it("a peer that keeps sending after its head is cut off", () => {
    const route = createSelfStatusRoute({ authenticate: acme, statusOf: () => new Promise(() => {}), log });
    const s = fakeSocket();
    route(s.socket, request("Bearer acme"), Buffer.alloc(0));
    s.stream.emit("data", Buffer.alloc(MAX_SELF_STATUS_DISCARDED_BYTES + 1));
    expect(s.stream.destroyed).toBe(true);
  });

  it("the answers: one write with Content-Length, no-store, the error code on refusals", () => {
    const ok = formatSelfStatusResponse("ok", status("acme")).toString("utf8");
    const [head, body] = ok.split("\r\n\r\n") as [string, string];
    expect(head).toContain(`Content-Length: ${Buffer.byteLength(body)}`);
    expect(head).toContain("Cache-Control: no-store");
    expect(head).not.toContain("X-Kgw-Error-Code");
    expect(JSON.parse(body)).toEqual(status("acme"));
    const refused = formatSelfStatusResponse("unauthenticated").toString("utf8");
    expect(refused).toContain("X-Kgw-Error-Code: ERR_UNAUTHENTICATED");
    expect(JSON.parse(refused.split("\r\n\r\n")[1]!)).toMatchObject({
      error: { code: "ERR_UNAUTHENTICATED" },
    });
  });
});
