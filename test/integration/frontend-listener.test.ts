/**
 * The frontend listeners (TCP+mTLS and Unix socket) facing bad and unauthenticated input. Every
 * case must get a clear answer, close only its own connection, and leave the gateway healthy.
 */

import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { connect as netConnect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ConnectionOptions, connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectThrough } from "../helpers/connect-client.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";

let t: TestGateway;
let dir: string;
let uds: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kgw-uds-"));
  uds = join(dir, "konnectivity.sock");
  t = await startTestGateway([`--uds-name=${uds}`, "--header-timeout=400ms", "--max-header-bytes=4096"]);
});

afterAll(async () => {
  await t.gw.close();
  rmSync(dir, { recursive: true, force: true });
});

type Dialer = () => Socket;
const port = () => t.gw.addresses.frontend!.port;
/** A frontend caller's TLS options: its certificate, the gateway's CA. */
const callerTls = () => ({
  host: "127.0.0.1",
  port: port(),
  servername: "localhost",
  ca: t.pki.ca.certPem,
  cert: t.pki.frontend.certPem,
  key: t.pki.frontend.keyPem,
  ALPNProtocols: ["http/1.1"],
});
const overTls: Dialer = () => tlsConnect(callerTls());
const overUds: Dialer = () => netConnect(uds);

/** Sends `bytes`, returns everything the server answers until it closes the connection. */
function exchange(dial: Dialer, bytes: Buffer | string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = dial();
    const chunks: Buffer[] = [];
    s.on("data", (c) => chunks.push(c));
    s.on("error", reject);
    s.on("close", () => resolve(Buffer.concat(chunks).toString("latin1")));
    s.write(bytes);
  });
}

async function healthy(): Promise<void> {
  const res = await fetch(`http://${t.health}/healthz`);
  expect(res.status).toBe(200);
}

describe.each([
  ["TCP+mTLS", () => overTls],
  ["Unix socket", () => overUds],
])("frontend over %s", (_name, dialer) => {
  it("answers CONNECT with 503 while no agent is connected", async () => {
    const answer = await exchange(dialer(), "CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
    expect(answer).toContain("X-Kgw-Error-Code: ERR_NO_AGENT");
  });

  it("answers a request that is not CONNECT with 405", async () => {
    const answer = await exchange(dialer(), "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 405 /);
    expect(answer).toContain("Allow: CONNECT");
  });

  it("answers a malformed target with 400", async () => {
    const answer = await exchange(dialer(), "CONNECT not a target HTTP/1.1\r\nHost: x\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("answers garbage bytes with 400", async () => {
    const answer = await exchange(
      dialer(),
      Buffer.from([0x16, 0x03, 0x01, 0x00, 0xff, 0x0d, 0x0a, 0x0d, 0x0a]),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("answers an oversized head with 431 without waiting for its end", async () => {
    const answer = await exchange(dialer(), `CONNECT 10.0.0.1:443 HTTP/1.1\r\nX-Big: ${"a".repeat(8192)}`);
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
  });

  it("closes a connection whose head is too slow with 408", async () => {
    const started = Date.now();
    const answer = await exchange(dialer(), "CONNECT 10.0.0.1:443 HTTP/1.1\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
  });

  it("closes a connection that sends nothing at all", async () => {
    const answer = await exchange(dialer(), "");
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    await healthy();
  });
});

describe("TLS on the TCP frontend", () => {
  it("refuses a client without a certificate", async () => {
    const result = await connectThrough(
      { kind: "tls", host: "127.0.0.1", port: port(), pki: t.pki, clientCert: false },
      "10.0.0.1:443",
    ).then(
      () => "connected",
      (err: NodeJS.ErrnoException) => err.code ?? err.message,
    );
    expect(result).not.toBe("connected");
    await healthy();
  });

  it("refuses TLS versions below 1.2", async () => {
    const err = await new Promise<Error>((resolve) => {
      const s = tlsConnect({
        host: "127.0.0.1",
        port: port(),
        servername: "localhost",
        ca: t.pki.ca.certPem,
        maxVersion: "TLSv1.1",
        minVersion: "TLSv1",
      });
      s.on("error", resolve);
      s.on("secureConnect", () => resolve(new Error("handshake succeeded")));
    });
    expect(err.message).not.toBe("handshake succeeded");
  });

  it.each([
    ["frontend", () => port()],
    ["agent", () => t.gw.addresses.agent.port],
  ])(
    "chooses TLS 1.3 with AES-128-GCM on the %s port for a client offering Node's defaults",
    async (_n, p) => {
      const s = tlsConnect({
        host: "127.0.0.1",
        port: p(),
        servername: "localhost",
        ca: t.pki.ca.certPem,
        cert: t.pki.frontend.certPem,
        key: t.pki.frontend.keyPem,
      });
      await new Promise<void>((resolve, reject) => {
        s.once("secureConnect", resolve);
        s.once("error", reject);
      });
      // Node's own preference would have been AES-256-GCM.
      expect(s.getProtocol()).toBe("TLSv1.3");
      expect(s.getCipher().name).toBe("TLS_AES_128_GCM_SHA256");
      s.destroy();
    },
  );

  it("answers plaintext bytes on the TLS port by closing only that connection", async () => {
    const answer = await exchange(
      () => netConnect(port(), "127.0.0.1"),
      "CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n",
    );
    expect(answer).not.toMatch(/^HTTP\/1\.1 200/);
    await healthy();
  });
});

/**
 * Takes the first session ticket a fresh connection is sent, then connects again offering it:
 * true when the server resumed the session instead of doing a full handshake.
 */
async function resumesWithTicket(options: ConnectionOptions): Promise<boolean> {
  const first = tlsConnect(options);
  first.on("error", () => {});
  const [ticket] = (await once(first, "session")) as [Buffer];
  first.destroy();
  const second = tlsConnect({ ...options, session: ticket });
  second.on("error", () => {});
  await once(second, "secureConnect");
  const reused = second.isSessionReused();
  second.destroy();
  return reused;
}

describe("TLS session resumption", () => {
  // The listeners seal no stateless tickets (tls-files.ts): a ticket a client keeps does not
  // resume, so every connection shows and has checked its certificate in a full handshake.
  it("gives the frontend's callers no ticket that resumes a session", async () => {
    expect(await resumesWithTicket(callerTls())).toBe(false);
    // The same client still connects and is served.
    const answer = await exchange(overTls, "CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 503 /);
  });

  it("gives clients of the agent port no ticket that resumes a session", async () => {
    const options = {
      host: "127.0.0.1",
      port: t.gw.addresses.agent.port,
      servername: "localhost",
      ca: t.pki.ca.certPem,
      ALPNProtocols: ["h2"],
    };
    expect(await resumesWithTicket(options)).toBe(false);
  });
});

describe("health and admin", () => {
  it("is live but not ready without agents", async () => {
    await healthy();
    const ready = await fetch(`http://${t.health}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.text()).toContain("no agent");
  });

  it("serves upstream metric names on /metrics", async () => {
    const body = await (await fetch(`http://${t.admin}/metrics`)).text();
    expect(body).toContain("konnectivity_network_proxy_server_ready_backend_connections 0");
    expect(body).toContain("konnectivity_network_proxy_server_dial_failure_count");
    expect(body).toMatch(
      /kgw_server_rejected_connections_total\{listener="tcp",reason="ERR_BAD_REQUEST"\} \d+/,
    );
  });

  it("answers unknown paths with 404 and writes with 405", async () => {
    expect((await fetch(`http://${t.admin}/nope`)).status).toBe(404);
    expect((await fetch(`http://${t.health}/healthz`, { method: "POST" })).status).toBe(405);
  });
});

describe("the agent port and the plain HTTP ports", () => {
  const agentPort = () => t.gw.addresses.agent.port;

  it("survives plaintext garbage on the agent port", async () => {
    const answer = await exchange(() => netConnect(agentPort(), "127.0.0.1"), Buffer.alloc(4096, 0x41));
    expect(answer).toBe("");
    await healthy();
  });

  it("survives a TLS client that speaks HTTP/1.1 instead of gRPC on the agent port", async () => {
    const answer = await exchange(
      () =>
        tlsConnect({ host: "127.0.0.1", port: agentPort(), servername: "localhost", ca: t.pki.ca.certPem }),
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    ).catch((err: Error) => err.message);
    expect(answer).not.toMatch(/200/);
    await healthy();
  });

  it("answers garbage on the health port with 400 and stays up", async () => {
    const [host, p] = t.health.split(":");
    const answer = await exchange(() => netConnect(Number(p), host!), "\x00\x01\x02 garbage\r\n\r\n");
    expect(answer).toMatch(/^HTTP\/1\.1 400/);
    await healthy();
  });
});

describe("HTTP/2 windows", () => {
  it.each([
    ["agent port", () => t.gw.addresses.agent.port],
    ["frontend port", () => t.gw.addresses.frontend!.port],
  ])("the %s advertises WAN-sized windows, not HTTP/2's 64 KiB", async (_name, port) => {
    const { connect } = await import("node:http2");
    const { HTTP2_STREAM_WINDOW_BYTES } = await import("../../lib/transport/grpc/windows.js");
    const session = connect(`https://localhost:${port()}`, {
      ca: t.pki.ca.certPem,
      cert: t.pki.frontend.certPem,
      key: t.pki.frontend.keyPem,
    });
    const settings = await new Promise<{ initialWindowSize?: number }>((resolve, reject) => {
      session.once("remoteSettings", resolve);
      session.once("error", reject);
    });
    expect(settings.initialWindowSize).toBe(HTTP2_STREAM_WINDOW_BYTES);
    await new Promise<void>((r) => session.close(() => r()));
  });
});
