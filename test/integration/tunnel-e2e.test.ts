/**
 * Whole tunnels through a real gateway and our real agent to a real HTTP backend, over every
 * frontend: gRPC (TCP+mTLS), HTTP CONNECT over TCP+mTLS, HTTP CONNECT over the Unix socket.
 */

import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { Readable } from "node:stream";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { TunnelClient } from "../../lib/client/tunnel-client.js";
import { AGENT_RECEIVE_WINDOW_BYTES } from "../../lib/tunnel/flow-control.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import {
  closedPort,
  type HttpBackend,
  patternStream,
  sha256Of,
  startHttpBackend,
} from "../helpers/backends.js";
import { bodyText, connectThrough, httpOver, type ProxyTarget } from "../helpers/connect-client.js";
import { frontendClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";

const MiB = 1024 * 1024;
let t: TestGateway;
let agent: RunningAgent;
let backend: HttpBackend;
let grpc: TunnelClient;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "kgw-e2e-"));
  t = await startTestGateway([`--uds-name=${join(dir, "k.sock")}`]);
  backend = await startHttpBackend();
  ({ agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port));
  await waitFor(() => t.gw.ready, 5000, "agent connected");
  grpc = frontendClient(t);
});

afterAll(async () => {
  grpc.close();
  await agent.stop();
  await t.gw.close();
  await backend.close();
  rmSync(dir, { recursive: true, force: true });
});

type Opener = (target: string) => Promise<Duplex>;
const tls = (): ProxyTarget => ({
  kind: "tls",
  host: "127.0.0.1",
  port: t.gw.addresses.frontend!.port,
  pki: t.pki,
});
const uds = (): ProxyTarget => ({ kind: "uds", path: t.gw.addresses.uds! });
async function viaConnect(proxy: ProxyTarget, target: string): Promise<Duplex> {
  const r = await connectThrough(proxy, target);
  if (r.status !== 200) throw new Error(`CONNECT answered ${r.status}`);
  expect(r.head.length).toBe(0);
  return r.socket;
}
const frontends: Array<[string, () => Opener]> = [
  ["gRPC over TCP+mTLS", () => (target) => grpc.dial(target)],
  ["CONNECT over TCP+mTLS", () => (target) => viaConnect(tls(), target)],
  ["CONNECT over the Unix socket", () => (target) => viaConnect(uds(), target)],
];

describe.each(frontends)("through %s", (name, opener) => {
  it("carries an HTTP request and response", async () => {
    const res = await httpOver(await opener()(backend.address), "/hello");
    expect(res.statusCode).toBe(200);
    expect(await bodyText(res)).toBe("hello from the backend");
  });

  it("leaves a debug line per established dial, naming the caller, the agent and the connection", async () => {
    const before = t.logs.length;
    const socket = await opener()(backend.address);
    const line = () =>
      t.logs
        .slice(before)
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.msg === "dial established");
    await waitFor(() => line() !== undefined, 2000, "the dial logged");
    expect(line()).toMatchObject({
      level: "debug",
      address: backend.address,
      agentId: expect.any(String),
      connectId: expect.stringMatching(/^\d+$/),
      dialMs: expect.any(Number),
      // The caller's identity, built when its connection was accepted: the client certificate
      // (its CN and serial) over TCP, the socket itself over the Unix socket.
      caller: name.includes("Unix") ? "uds" : expect.stringMatching(/^cert:.+#[0-9A-F]+$/),
    });
    socket.destroy();
  });

  it("ends cleanly when the backend closes the connection", async () => {
    const socket = await opener()(backend.address);
    const errors: Error[] = [];
    socket.on("error", (err) => errors.push(err));
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    const closed = new Promise((resolve) => socket.once("close", resolve));
    socket.write("GET /hello HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n");
    await closed;
    expect(Buffer.concat(chunks).toString()).toMatch(/^HTTP\/1\.1 200 [\s\S]*hello from the backend$/);
    expect(errors).toEqual([]);
  });

  it("downloads 64 MiB intact", async () => {
    const res = await httpOver(await opener()(backend.address), `/bytes?n=${64 * MiB}`);
    const got = await sha256Of(res);
    const want = await sha256Of(patternStream(64 * MiB));
    expect(got).toEqual(want);
  });

  it("uploads 64 MiB intact", async () => {
    const res = await httpOver(await opener()(backend.address), "/sha256", {
      method: "POST",
      body: patternStream(64 * MiB, 3),
    });
    const want = await sha256Of(patternStream(64 * MiB, 3));
    expect(JSON.parse(await bodyText(res))).toEqual({ sha256: want.hex, bytes: want.bytes });
  });
});

describe("one large write through the gRPC frontend", () => {
  it("arrives intact when two packets written back to back hold more than the agent's window", async () => {
    // konnectivity-client sends one DATA packet per Write; the server splits each and sends the
    // parts past the agent's window (AGENT_RECEIVE_WINDOW_BYTES, 16 MiB) only as credit returns
    // (a packet alone is at most MAX_MESSAGE_BYTES, the window's size, hence two). That it never
    // overruns the window is ConnectionCredit.write's unit test: here the backend reads too fast
    // for an overrun to show; what this checks is that the split parts arrive whole, in order.
    expect(2 * 12 * MiB).toBeGreaterThan(AGENT_RECEIVE_WINDOW_BYTES);
    const parts: Buffer[] = [];
    for await (const c of patternStream(24 * MiB, 5)) parts.push(c as Buffer);
    const body = Buffer.concat(parts);
    const res = await httpOver(await grpc.dial(backend.address), "/sha256", {
      method: "POST",
      body: Readable.from([body.subarray(0, 12 * MiB), body.subarray(12 * MiB)]),
    });
    const want = await sha256Of(patternStream(24 * MiB, 5));
    expect(JSON.parse(await bodyText(res))).toEqual({ sha256: want.hex, bytes: want.bytes });
  });
});

describe("dial errors", () => {
  it("reports a closed port as 502 on CONNECT and as a dial error on gRPC", async () => {
    const port = await closedPort();
    const r = await connectThrough(tls(), `127.0.0.1:${port}`);
    expect(r.status).toBe(502);
    r.socket.destroy();
    await expect(grpc.dial(`127.0.0.1:${port}`)).rejects.toMatchObject({ code: "ERR_DIAL_FAILED" });
  });
});

describe("curl as a CONNECT client", () => {
  it("fetches through the gateway with an HTTPS proxy and a client certificate", async () => {
    const f = t.pki.files;
    const { stdout } = await promisify(execFile)("curl", [
      "--silent",
      "--show-error",
      "--fail",
      "--max-time",
      "10",
      "--proxytunnel",
      "--proxy",
      `https://localhost:${t.gw.addresses.frontend!.port}`,
      "--proxy-cacert",
      f.caCert,
      "--proxy-cert",
      f.frontendCert,
      "--proxy-key",
      f.frontendKey,
      `http://${backend.address}/hello`,
    ]);
    expect(stdout).toBe("hello from the backend");
  });
});

describe("many connections through one agent", () => {
  it("serves 200 concurrent connections", async () => {
    const open = frontends.map(([, o]) => o());
    const results = await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const res = await httpOver(
          await open[i % open.length]!(backend.address),
          `/bytes?n=${16 * 1024 + i}`,
        );
        return (await sha256Of(res)).bytes;
      }),
    );
    expect(results).toEqual(Array.from({ length: 200 }, (_, i) => 16 * 1024 + i));
    await waitFor(() => t.gw.activeTunnels === 0, 5000, "all tunnels closed");
  });
});

describe("a caller that stops reading", () => {
  async function bytesToClients(): Promise<number> {
    const m = await t.gw.metrics.tunnelBytes.get();
    return m.values.find((v) => v.labels.direction === "to_client")?.value ?? 0;
  }

  it("does not stall the other connections of the same agent", async () => {
    const stalled = await viaConnect(tls(), backend.address);
    stalled.pause();
    const before = await bytesToClients();
    stalled.write(`GET /bytes?n=${512 * MiB} HTTP/1.1\r\nHost: backend\r\n\r\n`);
    // Its window fills and then it stays stuck: no more bytes move for it.
    await waitFor(async () => (await bytesToClients()) - before > 2 * MiB, 5000, "stalled connection filled");

    for (const [, open] of frontends) {
      const res = await httpOver(await open()(backend.address), `/bytes?n=${16 * MiB}`);
      expect((await sha256Of(res)).bytes).toBe(16 * MiB);
    }
    // The stalled one still holds only about one window, not the 512 MiB it asked for.
    expect((await bytesToClients()) - before).toBeLessThan(3 * 16 * MiB + 8 * MiB);
    stalled.destroy();
    await waitFor(() => t.gw.activeTunnels === 0, 5000, "all tunnels closed");
  });
});

describe("many short tunnels on one gRPC channel", () => {
  it("close cleanly instead of resetting streams, so the channel survives rapid-reset limits", async () => {
    // HTTP/2 servers close a connection that resets streams in rapid bursts (CVE-2023-44487
    // protection); a client that cancelled each finished tunnel lost its channel after ~1,000.
    for (let i = 0; i < 1200; i++) {
      const socket = await grpc.dial(backend.address);
      socket.destroy();
    }
    const res = await httpOver(await grpc.dial(backend.address), "/hello");
    expect(await bodyText(res)).toBe("hello from the backend");
    await waitFor(() => t.gw.activeTunnels === 0, 5000, "all tunnels closed");
  });
});
