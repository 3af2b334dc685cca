/**
 * What an unauthenticated peer can make the gateway write to its log. An install link's path
 * holds an unspent install token, and whoever reads it in a log can redeem it for an agent token:
 * so the link is sent to every entry point that can receive it (HTTP/2 GET and gRPC POST on the
 * gateway port, HTTP/1.1 in every malformed shape on the gateway port and on --install-port)
 * and no fragment of its secret may appear in the log. And a flood of refused requests with
 * huge paths must add a bounded number of bounded lines.
 */
import { readFileSync } from "node:fs";
import { type ClientHttp2Session, connect as h2Connect } from "node:http2";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REFUSAL_LINES_PER_SECOND } from "../../lib/observability/refusal-log.js";
import { waitFor } from "../helpers/agent.js";
import { closedPort } from "../helpers/backends.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { getTestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let store: TestTenantStore;
let t: TestGateway;
let ca: Buffer;
let baseline: Map<string, number>;

beforeAll(async () => {
  const pki = await getTestPki();
  ca = readFileSync(pki.files.caCert);
  baseline = resources();
  store = makeTenantStore(pki);
  await store.create("acme");
  t = await startTenantGateway(store.dir, [
    "--install-gateway-address=kgw.example.test:8132",
    "--header-timeout=1s",
    `--install-port=${await closedPort()}`,
    "--install-bind-address=127.0.0.1",
  ]);
});

afterAll(async () => {
  await t?.gw.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

async function issue(): Promise<string> {
  const out = (await store.run(["install-token", "acme", `--gateway-address=${t.agent}`])) as {
    installToken: { token: string };
  };
  return out.installToken.token;
}

/** Raw bytes over TLS with ALPN http/1.1; resolves with the answer once the gateway closes. */
function exchange(port: number, request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({
      host: "127.0.0.1",
      port,
      ca,
      servername: "localhost",
      ALPNProtocols: ["http/1.1"],
    });
    let got = "";
    s.on("secureConnect", () => s.write(request));
    s.on("data", (c: Buffer) => {
      got += c.toString("latin1");
    });
    s.on("error", reject);
    s.on("close", () => resolve(got));
  });
}

function h2Session(): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = h2Connect(`https://127.0.0.1:${t.gw.addresses.agent.port}`, {
      ca,
      servername: "localhost",
    });
    session.once("connect", () => resolve(session));
    session.once("error", reject);
  });
}

/** One HTTP/2 request; resolves with its response headers once the stream has closed. */
function h2Request(
  session: ClientHttp2Session,
  headers: Record<string, string>,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: true });
    let answer: Record<string, unknown> = {};
    req.on("response", (h) => {
      answer = { ...answer, ...h };
    });
    req.on("trailers", (h) => {
      answer = { ...answer, ...h };
    });
    req.on("error", reject);
    req.resume();
    req.on("close", () => resolve(answer));
  });
}

/** Every fragment of `secret` this long is looked for in the log: a prefix would do as well as the whole. */
const FRAGMENT = 12;

function expectNoFragmentLogged(secret: string): void {
  const log = t.logs.join("\n");
  for (let i = 0; i + FRAGMENT <= secret.length; i++) {
    expect(log.includes(secret.slice(i, i + FRAGMENT)), `fragment at ${i} of the secret is in the log`).toBe(
      false,
    );
  }
}

describe("an install link sent where it is not served", () => {
  it("never reaches the log, whatever the entry point", async () => {
    const token = await issue();
    const secret = token.slice(-64);
    const path = `/v1/install/${token}.yaml`;
    const refusedBefore = t.logs.length;

    // HTTP/2 on the gateway port: a GET (not gRPC: 405) and a gRPC POST (no such method).
    const session = await h2Session();
    try {
      expect((await h2Request(session, { ":method": "GET", ":path": path }))[":status"]).toBe(405);
      const post = await h2Request(session, {
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
        te: "trailers",
      });
      expect(post["grpc-status"]).toBe("12"); // UNIMPLEMENTED
      // A header value is never logged either: an encoding we do not speak, named by the token.
      const encoded = await h2Request(session, {
        ":method": "POST",
        ":path": "/ProxyService/Proxy",
        "content-type": "application/grpc",
        "grpc-encoding": token,
        te: "trailers",
      });
      expect(encoded["grpc-status"]).toBe("12");
    } finally {
      session.close();
    }

    // HTTP/1.1 shapes the parser refuses, on the gateway port and on --install-port.
    const malformed = [
      `GET ${path}  HTTP/1.1\r\nHost: x\r\n\r\n`, // two spaces: the request line is malformed
      `GET ${path}#x HTTP/1.1\r\nHost: x\r\n\r\n`, // a fragment: not an origin-form target
      `GET ${path} HTTP/1.2\r\nHost: x\r\n\r\n`,
      `POST ${path} HTTP/1.1\r\nHost: x\r\n\r\n`,
      `GET ${path}?x=1 HTTP/1.1\r\nHost: x\r\n\r\n`, // not the route: 404
      `GET ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx`, // a body: 400
      `CONNECT ${token}:443 HTTP/1.1\r\nHost: x\r\n\r\n`,
    ];
    for (const port of [t.gw.addresses.agent.port, t.gw.addresses.install!.port]) {
      for (const request of malformed) {
        expect(await exchange(port, request)).toMatch(/^HTTP\/1\.1 4\d\d /);
      }
    }
    await waitFor(() => t.logs.length > refusedBefore, 2000, "the refusals logged");
    expectNoFragmentLogged(secret);

    // And served: the log names the token id, not the secret.
    const served = await exchange(t.gw.addresses.install!.port, `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(served).toMatch(/^HTTP\/1\.1 200 /);
    expectNoFragmentLogged(secret);
  });
});

describe("a flood of refused HTTP/2 requests", () => {
  it("adds a bounded number of bounded lines to the log", async () => {
    const REQUESTS = 200;
    const hugePath = `/${"a".repeat(8 * 1024)}`;
    const session = await h2Session();
    const logBytes = (from: number, level?: string) =>
      t.logs
        .slice(from)
        .filter((l) => level === undefined || (JSON.parse(l) as { level: string }).level === level)
        .reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
    const from = t.logs.length;
    const started = performance.now();
    try {
      const answers = await Promise.all(
        Array.from({ length: REQUESTS }, () => h2Request(session, { ":method": "GET", ":path": hugePath })),
      );
      expect(answers.every((a) => a[":status"] === 405)).toBe(true);
    } finally {
      session.close();
    }
    const seconds = Math.ceil((performance.now() - started) / 1000);
    await waitFor(() => t.logs.length - from >= REQUESTS, 2000, "every refusal written (at info or debug)");
    const added = t.logs.slice(from);
    const MAX_LINE_BYTES = 1024;
    expect(Math.max(...added.map((l) => Buffer.byteLength(l)))).toBeLessThan(MAX_LINE_BYTES);
    // At info (the level an operator runs at), the budget: so many lines a second of the flood.
    const infoLines = added.filter((l) => (JSON.parse(l) as { level: string }).level === "info").length;
    expect(infoLines).toBeLessThanOrEqual(REFUSAL_LINES_PER_SECOND * (seconds + 1));
    expect(logBytes(from, "info")).toBeLessThan(REFUSAL_LINES_PER_SECOND * (seconds + 1) * MAX_LINE_BYTES);
    // Everything, debug included: well under what one 8 KB path a line would write (1.6 MiB).
    expect(logBytes(from)).toBeLessThan(REQUESTS * MAX_LINE_BYTES);
  });
});

describe("a flood of refused agent streams", () => {
  it("is logged within the refusal budget", async () => {
    const STREAMS = 100;
    const session = await h2Session();
    const from = t.logs.length;
    const started = performance.now();
    try {
      const answers = await Promise.all(
        Array.from({ length: STREAMS }, () =>
          h2Request(session, {
            ":method": "POST",
            ":path": "/AgentService/Connect",
            "content-type": "application/grpc",
            te: "trailers",
            agentid: "flooder",
            authorization: "Bearer kgw_agent_acme_0123456789abcdef_not-a-secret",
          }),
        ),
      );
      expect(answers.every((a) => a["grpc-status"] === "16")).toBe(true); // UNAUTHENTICATED
    } finally {
      session.close();
    }
    const seconds = Math.ceil((performance.now() - started) / 1000);
    const refusals = () => t.logs.slice(from).filter((l) => l.includes('"agent stream refused"'));
    await waitFor(() => refusals().length >= STREAMS, 2000, "every refusal written (at info or debug)");
    const atInfoOrAbove = refusals().filter((l) => !l.includes('"level":"debug"'));
    expect(atInfoOrAbove.length).toBeLessThanOrEqual(REFUSAL_LINES_PER_SECOND * (seconds + 1));
  });
});
