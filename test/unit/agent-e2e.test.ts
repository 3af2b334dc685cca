/**
 * The agent end to end against a stand-in proxy server: a bare grpc-js server over TLS that
 * implements AgentService.Connect just enough to script scenarios (headers, packets, refusals).
 * It does not use lib/server, so these tests pin down the agent's own wire behaviour.
 */

import { once } from "node:events";
import { readFileSync, writeFileSync } from "node:fs";
import { type AddressInfo, createServer, type Server as NetServer } from "node:net";
import { join } from "node:path";
import { Writable } from "node:stream";
import { Metadata, Server, ServerCredentials, type ServerDuplexStream, status } from "@grpc/grpc-js";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { type RunningAgent, startAgent } from "../../lib/agent/agent.js";
import type { AgentOptions } from "../../lib/config/agent-options.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { createLogger } from "../../lib/observability/logger.js";
import { dataPacket, dialRequest, type Packet, PacketType } from "../../lib/proto/packet.js";
import { AGENT_SERVICE } from "../../lib/transport/grpc/services.js";
import { waitFor } from "../helpers/agent.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

interface Stream {
  call: ServerDuplexStream<Packet, Packet>;
  metadata: Record<string, string[]>;
  received: Packet[];
  ended: boolean;
}

interface FakeServerScript {
  /** serverID to announce for the n-th stream (0-based); null refuses the stream. */
  serverIdFor: (n: number) => string | null;
  serverCount: number;
}

let pki: TestPki;
beforeAll(async () => {
  pki = await getTestPki();
});

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function fakeProxyServer(script: FakeServerScript) {
  const streams: Stream[] = [];
  const server = new Server();
  server.addService(AGENT_SERVICE, {
    connect: (call: ServerDuplexStream<Packet, Packet>) => {
      const n = streams.length;
      const s: Stream = { call, metadata: {}, received: [], ended: false };
      for (const [k, v] of Object.entries(call.metadata.getMap())) s.metadata[k] = [String(v)];
      s.metadata.authorization = call.metadata.get("authorization").map(String);
      streams.push(s);
      call.on("data", (p: Packet) => s.received.push(p));
      call.on("error", () => {});
      const finished = () => {
        s.ended = true;
      };
      // As upstream's Connect handler returns on the agent's EOF: the call ends with OK.
      call.on("end", () => {
        finished();
        call.end();
      });
      call.on("cancelled", finished);
      const serverId = script.serverIdFor(n);
      if (serverId === null) {
        call.emit("error", { code: status.UNAUTHENTICATED, details: "bad token" });
        return;
      }
      const headers = new Metadata();
      headers.set("serverid", serverId);
      headers.set("servercount", String(script.serverCount));
      call.sendMetadata(headers);
    },
  });
  const creds = ServerCredentials.createSsl(
    null,
    [{ cert_chain: readFileSync(pki.files.serverCert), private_key: readFileSync(pki.files.serverKey) }],
    false,
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", creds, (err, p) => (err ? reject(err) : resolve(p))),
  );
  cleanups.push(() => {
    server.forceShutdown();
  });
  const live = () => streams.filter((s) => !s.ended);
  return { port, streams, live };
}

/** Captures every log line so tests can check what was (not) logged. */
function capturingLogger() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { log: createLogger({ name: "agent-test", level: "trace", destination }), lines };
}

function options(port: number, overrides: Partial<AgentOptions> = {}): AgentOptions {
  return {
    agentId: "agent-under-test",
    agentIdentifiers: "host=node1&default-route=true",
    // Dial the IP, verify the certificate as "localhost": exercises --server-name.
    server: { host: "127.0.0.1", port, serverName: "localhost", keepaliveMs: 0, transport: "auto" },
    tls: { caCert: pki.files.caCert, agentCert: "", agentKey: "" },
    auth: { tokenPath: "", token: "" },
    sync: { intervalMs: 20, intervalCapMs: 100, probeIntervalMs: 50 },
    dialTimeoutMs: 2_000,
    destinations: { allowLinkLocal: false },
    drainTimeoutMs: 5_000,
    health: { host: "127.0.0.1", port: 0 },
    admin: { host: "127.0.0.1", port: 0 },
    logLevel: "info",
    ...overrides,
  };
}

async function start(opts: AgentOptions, log = capturingLogger().log): Promise<RunningAgent> {
  const agent = await startAgent(opts, { log, metrics: new AgentMetrics() });
  cleanups.push(() => agent.stop());
  return agent;
}

const get = async (addr: AddressInfo, path: string, method = "GET") => {
  const res = await fetch(`http://127.0.0.1:${addr.port}${path}`, { method });
  return { status: res.status, body: await res.text() };
};

async function echoBackend(): Promise<NetServer> {
  const server = createServer((s) => s.pipe(s));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(async () => {
    server.close();
    await once(server, "close");
  });
  return server;
}

/** Sockets and timers alive in this process (servers are checked per test). */
const liveHandles = () =>
  process
    .getActiveResourcesInfo()
    .filter((r) => r === "TCPSocketWrap" || r === "Timeout")
    .sort();

const connections = (server: NetServer) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

describe("agent against a proxy server", () => {
  it("connects with its metadata and becomes ready; health and admin answer", async () => {
    const fake = await fakeProxyServer({ serverIdFor: () => "s1", serverCount: 1 });
    const { log, lines } = capturingLogger();
    const agent = await start(options(fake.port, { auth: { tokenPath: "", token: "tok-very-secret" } }), log);
    await vi.waitFor(() => expect(agent.ready).toBe(true));
    expect(fake.streams[0]!.metadata).toMatchObject({
      agentid: ["agent-under-test"],
      agentidentifiers: ["host=node1&default-route=true"],
      authorization: ["Bearer tok-very-secret"],
    });
    expect(agent.state()).toMatchObject({ connectedServers: ["s1"], targetServerCount: 1 });

    expect(await get(agent.healthAddress, "/healthz")).toEqual({ status: 200, body: "ok" });
    expect(await get(agent.healthAddress, "/readyz")).toEqual({ status: 200, body: "ok" });
    expect(await get(agent.healthAddress, "/nope")).toMatchObject({ status: 404 });
    expect(await get(agent.healthAddress, "/readyz", "POST")).toMatchObject({ status: 405 });
    const metrics = await get(agent.adminAddress, "/metrics");
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain("konnectivity_network_proxy_agent_open_server_connections 1");
    expect(metrics.body).toContain("konnectivity_network_proxy_agent_known_server_count 1");

    await agent.stop();
    await vi.waitFor(() => expect(fake.live()).toHaveLength(0));
    expect(lines.join("")).not.toContain("tok-very-secret");
  });

  it("serves /metrics on the admin port only: the health port listens on every interface", async () => {
    const fake = await fakeProxyServer({ serverIdFor: () => "s1", serverCount: 1 });
    const agent = await start(options(fake.port));
    expect(await get(agent.healthAddress, "/metrics")).toMatchObject({ status: 404 });
    const metrics = await get(agent.adminAddress, "/metrics");
    expect(metrics.status).toBe(200);
    expect(metrics.body).toContain("kgw_agent_destination_refusals_total");
    expect(await get(agent.healthAddress, "/healthz")).toEqual({ status: 200, body: "ok" });
  });

  it("is not ready while no server can be reached", async () => {
    const fake = await fakeProxyServer({ serverIdFor: () => null, serverCount: 1 });
    const agent = await start(options(fake.port));
    await vi.waitFor(() => expect(fake.streams.length).toBeGreaterThanOrEqual(3)); // it keeps retrying
    expect(agent.ready).toBe(false);
    expect(await get(agent.healthAddress, "/readyz")).toMatchObject({ status: 503 });
    expect(await get(agent.healthAddress, "/healthz")).toEqual({ status: 200, body: "ok" });
  });

  it("keeps one stream per distinct server behind one address", async () => {
    // Through a load balancer: streams land on s1, s1 again, then s2.
    const ids = ["s1", "s1", "s2"];
    const fake = await fakeProxyServer({ serverIdFor: (n) => ids[n] ?? "s1", serverCount: 2 });
    const agent = await start(options(fake.port));
    await vi.waitFor(() => expect(agent.state().connectedServers.sort()).toEqual(["s1", "s2"]));
    // The duplicate stream was closed by the agent.
    await vi.waitFor(() => expect(fake.live()).toHaveLength(2));
    expect(fake.streams[1]!.ended).toBe(true);
  });

  it("re-reads the token file on every connect", async () => {
    const tokenPath = join(pki.dir, `token-${process.pid}`);
    writeFileSync(tokenPath, "first-token\n");
    const fake = await fakeProxyServer({ serverIdFor: () => "s1", serverCount: 1 });
    const agent = await start(options(fake.port, { auth: { tokenPath, token: "" } }));
    await vi.waitFor(() => expect(agent.ready).toBe(true));
    writeFileSync(tokenPath, "rotated-token");
    fake.streams[0]!.call.end(); // the server ends the stream; the agent reconnects
    await vi.waitFor(() => expect(fake.streams).toHaveLength(2));
    await vi.waitFor(() => expect(fake.live()).toEqual([fake.streams[1]]));
    expect(fake.streams.map((s) => s.metadata.authorization)).toEqual([
      ["Bearer first-token"],
      ["Bearer rotated-token"],
    ]);
  });

  it("tunnels a dial over gRPC, then drains and stops cleanly", async () => {
    const backend = await echoBackend();
    const fake = await fakeProxyServer({ serverIdFor: () => "s1", serverCount: 1 });
    const agent = await start(options(fake.port));
    await vi.waitFor(() => expect(agent.ready).toBe(true));
    const stream = fake.streams[0]!;
    stream.call.write(dialRequest(`127.0.0.1:${(backend.address() as AddressInfo).port}`, 77n));
    const rsp = await vi.waitFor(() => {
      const r = stream.received.find((p) => p.type === PacketType.DIAL_RSP);
      if (!r || r.type !== PacketType.DIAL_RSP) throw new Error("no DIAL_RSP yet");
      return r;
    });
    expect(rsp).toMatchObject({ random: 77n, error: "" });
    stream.call.write(dataPacket(rsp.connectId, Buffer.from("ping")));
    await vi.waitFor(() =>
      expect(
        stream.received.some((p) => p.type === PacketType.DATA && Buffer.from(p.data).toString() === "ping"),
      ).toBe(true),
    );

    const drained = agent.drain();
    await vi.waitFor(() => expect(stream.received.some((p) => p.type === PacketType.DRAIN)).toBe(true));
    expect(agent.state().draining).toBe(true);
    // The open connection keeps working during the drain; drain ends when it closes.
    stream.call.write({ type: PacketType.CLOSE_REQ, connectId: rsp.connectId });
    expect(await drained).toBe("idle");

    await agent.stop();
    await vi.waitFor(() => expect(fake.live()).toHaveLength(0));
    await vi.waitFor(async () => expect(await connections(backend)).toBe(0));
    // No socket and no timer of the agent outlives stop() (the test servers are listeners). The
    // channel's socket closes just after; polled with a sleep, since vi.waitFor's own timers
    // would count as live while it polls.
    await waitFor(() => liveHandles().length === 0, 2000, "no socket or timer left");
  });

  it("drops every backend connection when the server stream fails", async () => {
    const backend = await echoBackend();
    const fake = await fakeProxyServer({ serverIdFor: (n) => `s${n}`, serverCount: 1 });
    const agent = await start(options(fake.port));
    await vi.waitFor(() => expect(agent.ready).toBe(true));
    const stream = fake.streams[0]!;
    const port = (backend.address() as AddressInfo).port;
    stream.call.write(dialRequest(`127.0.0.1:${port}`, 1n));
    stream.call.write(dialRequest(`127.0.0.1:${port}`, 2n));
    await vi.waitFor(async () => expect(await connections(backend)).toBe(2));
    stream.call.emit("error", { code: status.UNAVAILABLE, details: "server going away" });
    await vi.waitFor(async () => expect(await connections(backend)).toBe(0));
    // ...and finds a server again.
    await vi.waitFor(() => expect(agent.state().connectedServers).toEqual(["s1"]));
  });
});
