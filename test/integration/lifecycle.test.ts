/**
 * Processes coming and going: agents killed, restarted and draining, servers restarted and shut
 * down gracefully, dials cancelled mid-flight. Ends with a check that nothing leaked.
 */
import { fork, spawn } from "node:child_process";
import type { Duplex } from "node:stream";
import { connect as tlsConnect } from "node:tls";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, hangingListener, startHttpBackend } from "../helpers/backends.js";
import { bodyText, connectThrough, httpOver, type ProxyTarget } from "../helpers/connect-client.js";
import { httpGet, metricAt } from "../helpers/endpoints.js";
import {
  AGENT_TOKEN,
  frontendClient,
  gatewayFlags,
  startTestGateway,
  type TestGateway,
} from "../helpers/gateway.js";
import { spawnKgw, spawnKgwAnnouncing } from "../helpers/kgw-process.js";
import { getTestPki } from "../helpers/pki.js";
import { activeResources as resources } from "../helpers/resources.js";

const CALLER = fileURLToPath(new URL("../helpers/grpc-download-caller.ts", import.meta.url));

let backend: HttpBackend;
let baseline: Map<string, number>;

/** Fails with `what` instead of hanging the test when `p` does not settle in time. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms}ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Handles and requests alive in this process, by kind, for the leak check. */
beforeAll(async () => {
  await getTestPki();
  baseline = resources();
  backend = await startHttpBackend();
});

afterAll(async () => {
  await backend.close();
  // Everything a test opened must be gone: sockets, servers, timers.
  await waitFor(
    () => {
      const now = resources();
      return [...now].every(([k, n]) => n <= (baseline.get(k) ?? 0));
    },
    5000,
    "no leaked handles",
  ).catch((err: Error) => {
    throw new Error(
      `${err.message}: ${JSON.stringify([...resources()])} vs ${JSON.stringify([...baseline])}`,
    );
  });
});

const tlsProxy = (t: TestGateway): ProxyTarget => ({
  kind: "tls",
  host: "127.0.0.1",
  port: t.gw.addresses.frontend!.port,
  pki: t.pki,
});

/**
 * curl downloading `path` from the backend through the gateway's mTLS CONNECT frontend, as
 * HTTP/1.0 so that a body without a length ends where the connection does. Resolves to curl's
 * exit code.
 */
function curlDownload(t: TestGateway, path: string): { received(): number; exited: Promise<number | null> } {
  const f = t.pki.files;
  const child = spawn(
    "curl",
    [
      "--silent",
      "--http1.0",
      "--max-time",
      "60",
      "--proxytunnel",
      "--proxy",
      `https://localhost:${t.gw.addresses.frontend!.port}`,
      "--proxy-cacert",
      f.caCert,
      "--proxy-cert",
      f.frontendCert,
      "--proxy-key",
      f.frontendKey,
      `http://${backend.address}${path}`,
    ],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  let received = 0;
  child.stdout!.on("data", (c: Buffer) => {
    received += c.length;
  });
  return {
    received: () => received,
    exited: new Promise((resolve) => {
      child.once("exit", (code) => resolve(code));
      child.once("error", () => resolve(null)); // no curl on this machine
    }),
  };
}

/** How a caller's stream ends: the error's code, or "end" for a clean end of stream. */
function howItEnds(stream: Duplex): Promise<string> {
  return new Promise((resolve) => {
    stream.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    stream.once("end", () => resolve("end"));
  });
}

function agentProcessArgs(t: TestGateway): string[] {
  return [
    "agent",
    "--proxy-server-host=127.0.0.1",
    `--proxy-server-port=${t.gw.addresses.agent.port}`,
    "--server-name=localhost",
    `--ca-cert=${t.pki.files.caCert}`,
    "--health-server-port=0",
    "--admin-server-port=0",
    "--sync-interval=100ms",
    "--sync-interval-cap=300ms",
    "--log-level=warn",
  ];
}

describe("an agent process that dies", () => {
  // Over kgw-tunnel/1 the server reads the socket itself and sees EOF at once. Over gRPC
  // (upstream agents) Node's HTTP/2 session can miss it while writing; Http2PeerWatch closes it
  // within about a second (a tick and a stall of half a second each).
  it.each([
    ["kgw-tunnel/1", "auto", 1000],
    ["gRPC", "grpc", 2000],
  ])(
    "over %s: tells callers of a killed agent promptly, as an error, and serves again once restarted",
    async (_name, transport, promptMs) => {
      const t = await startTestGateway();
      const env = { KGW_AGENT_TOKEN: AGENT_TOKEN };
      const args = [...agentProcessArgs(t), `--server-transport=${transport}`];
      const first = spawnKgw(args, env);
      await waitFor(() => t.gw.ready, 15_000, "agent process connected");

      // Downloads that are still running when the agent is killed: two over CONNECT (Node's
      // client, and curl reading a body that ends with the connection), one over gRPC.
      const r = await within(connectThrough(tlsProxy(t), backend.address), 5000, "CONNECT");
      expect(r.status).toBe(200);
      const res = await within(
        httpOver(r.socket, `/bytes?n=${1024 * 1024 * 1024}`),
        5000,
        "download response",
      );
      let received = 0;
      const closed = new Promise<number>((resolve) => {
        res.on("data", (c: Buffer) => {
          received += c.length;
        });
        res.on("error", () => resolve(Date.now()));
        res.on("close", () => resolve(Date.now()));
      });
      const grpc = frontendClient(t);
      const tunnel = await within(grpc.dial(backend.address), 5000, "gRPC dial");
      const grpcEnd = howItEnds(tunnel);
      let grpcReceived = 0;
      tunnel.on("data", (c: Buffer) => {
        grpcReceived += c.length;
      });
      tunnel.write(`GET /bytes?n=${1024 * 1024 * 1024} HTTP/1.1\r\nHost: backend\r\n\r\n`);
      const curl = curlDownload(t, `/stream?n=${1024 * 1024 * 1024}`);
      await waitFor(
        () => received > 1024 * 1024 && grpcReceived > 1024 * 1024 && curl.received() > 1024 * 1024,
        10_000,
        "downloads under way",
      );
      const killedAt = Date.now();
      first.child.kill("SIGKILL");
      const closedAt = await within(closed, 5000, "client told of the lost agent");
      expect(closedAt - killedAt).toBeLessThan(promptMs);
      expect(received).toBeLessThan(1024 * 1024 * 1024);
      // A broken tunnel must not look like a finished one. The CONNECT socket is broken off, not
      // ended: after a FIN, curl would report this cut-off body as complete (exit 0); what it
      // gets (a TLS record it must refuse after the last byte, then a reset:
      // lib/transport/break-socket.ts) is a receive error (56). The gRPC caller gets CLOSE_RSP
      // with an error.
      expect(await within(curl.exited, 5000, "curl exit")).toBe(56);
      expect(await within(grpcEnd, 5000, "gRPC tunnel ended")).toBe("ERR_CONNECTION_BROKEN");
      grpc.close();
      await waitFor(() => !t.gw.ready, 5000, "gateway noticed");

      const second = spawnKgw(args, env);
      await waitFor(() => t.gw.ready, 15_000, "restarted agent connected");
      const again = await within(connectThrough(tlsProxy(t), backend.address), 5000, "CONNECT after restart");
      expect(
        await within(bodyText(await httpOver(again.socket, "/hello")), 5000, "request after restart"),
      ).toBe("hello from the backend");

      second.child.kill("SIGTERM");
      expect(await within(second.exited, 15_000, "agent exit after SIGTERM")).toEqual({
        code: 0,
        signal: null,
      });
      await within(first.exited, 5000, "killed agent reaped");
      await t.gw.close();
    },
  );
});

describe("an idle agent process that gets SIGTERM", () => {
  // With nothing open the agent drains at once and stops: the DRAIN it sent just before must
  // still reach the server, ahead of the end of its stream, every time.
  it.each([
    ["kgw-tunnel/1", "auto"],
    ["gRPC", "grpc"],
  ])(
    "over %s: its DRAIN reaches the server before the stream ends, five times in five",
    async (_name, transport) => {
      const t = await startTestGateway();
      const args = [...agentProcessArgs(t), `--server-transport=${transport}`];
      for (let round = 1; round <= 5; round++) {
        const agent = spawnKgwAnnouncing(args, { KGW_AGENT_TOKEN: AGENT_TOKEN });
        // The server accepts the stream a moment before the agent holds it, and a signal in
        // between would find no stream to drain: wait for both ends, the agent's by its /readyz.
        const health = `127.0.0.1:${(await agent.ports()).health}`;
        await waitFor(
          async () => t.gw.ready && (await httpGet(health, "/readyz")).status === 200,
          15_000,
          `round ${round}: agent connected`,
        );
        const [session] = [...t.gw.registry.all()];
        agent.child.kill("SIGTERM");
        expect(await within(agent.exited, 15_000, `round ${round}: agent exit`)).toEqual({
          code: 0,
          signal: null,
        });
        await waitFor(() => session!.isClosed, 5000, `round ${round}: session closed`);
        expect({ round, draining: session!.draining }).toEqual({ round, draining: true });
      }
      await t.gw.close();
    },
  );
});

describe("a server that restarts", () => {
  it("gets its agent back on the same port", async () => {
    const t1 = await startTestGateway();
    const agentPort = t1.gw.addresses.agent.port;
    const { agent } = await startTestAgent(t1.pki, agentPort);
    await waitFor(() => t1.gw.ready, 5000, "agent connected");
    await t1.gw.close();
    await waitFor(() => !agent.ready, 5000, "agent noticed");

    const t2 = await startTestGateway([`--agent-port=${agentPort}`]);
    await waitFor(() => t2.gw.ready && agent.ready, 10_000, "agent reconnected");
    const r = await connectThrough(tlsProxy(t2), backend.address);
    expect(await bodyText(await httpOver(r.socket, "/hello"))).toBe("hello from the backend");
    await agent.stop();
    await t2.gw.close();
  });

  it("finishes open tunnels on graceful shutdown, refusing new ones", async () => {
    // A timeout no run reaches: a shutdown that waited for it instead of the tunnel fails below.
    const t = await startTestGateway(["--graceful-shutdown-timeout=5m"]);
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
    await waitFor(() => t.gw.ready, 5000, "agent connected");
    const open = await connectThrough(tlsProxy(t), backend.address);

    const stopped = t.gw.shutdown();
    await waitFor(async () => (await fetch(`http://${t.health}/readyz`).catch(() => null))?.status !== 200);
    await expect(connectThrough(tlsProxy(t), backend.address)).rejects.toThrow();
    // The tunnel opened before shutdown still works, and its end lets shutdown finish early.
    expect(await bodyText(await httpOver(open.socket, "/hello"))).toBe("hello from the backend");
    await within(stopped, 15_000, "shutdown once the last tunnel ended");
    await agent.stop();
  });
});

describe("cancelled dials", () => {
  it("reach the agent as DIAL_CLS and release the pending dial there", async () => {
    const t = await startTestGateway(["--backend-dial-timeout=30s"]);
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port, ["--dial-timeout=30s"]);
    await waitFor(() => t.gw.ready, 5000, "agent connected");
    const hanging = await hangingListener();
    const client = frontendClient(t);

    const dial = client.dial(`127.0.0.1:${hanging.port}`, { timeoutMs: 300 });
    await waitFor(() => agent.state().load === 1, 5000, "agent dialing");
    await expect(dial).rejects.toMatchObject({ code: "ERR_DIAL_TIMEOUT" });
    await waitFor(
      () => agent.state().load === 0 && t.gw.activeTunnels === 0,
      2000,
      "dial cancelled at the agent",
    );

    // A CONNECT client that hangs up while its dial is pending cancels it the same way.
    const socket = tlsConnect({
      host: "127.0.0.1",
      port: t.gw.addresses.frontend!.port,
      servername: "localhost",
      ca: t.pki.ca.certPem,
      cert: t.pki.frontend.certPem,
      key: t.pki.frontend.keyPem,
    });
    socket.write(`CONNECT 127.0.0.1:${hanging.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
    await waitFor(() => agent.state().load === 1, 5000, "agent dialing");
    socket.destroy();
    await waitFor(() => agent.state().load === 0 && t.gw.activeTunnels === 0, 2000, "dial released");

    client.close();
    hanging.close();
    await agent.stop();
    await t.gw.close();
  });
});

describe("a gRPC caller process that dies", () => {
  it("releases its tunnel at the gateway and the agent within a second or two", async () => {
    const t = await startTestGateway();
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
    await waitFor(() => t.gw.ready, 5000, "agent connected");
    const p = t.pki.files;
    // A download the server is busy writing when the caller is killed: Node's HTTP/2 session can
    // miss that death (lib/transport/http2-peer-watch.ts).
    const caller = fork(CALLER, [t.frontend, backend.address, p.caCert, p.frontendCert, p.frontendKey], {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "ignore", "ignore", "ipc"],
    });
    await within(new Promise((r) => caller.once("message", r)), 10_000, "caller receiving");
    expect(t.gw.activeTunnels).toBe(1);
    caller.kill("SIGKILL");
    await waitFor(
      () => t.gw.activeTunnels === 0 && agent.state().load === 0,
      3000,
      "tunnel released after the caller was killed",
    );
    await agent.stop();
    await t.gw.close();
  });
});

describe("a draining agent", () => {
  it("gets no new dials while another agent is available", async () => {
    const t = await startTestGateway();
    const a = await startTestAgent(t.pki, t.gw.addresses.agent.port, ["--agent-id=agent-a"]);
    const b = await startTestAgent(t.pki, t.gw.addresses.agent.port, [
      "--agent-id=agent-b",
      "--drain-timeout=10s",
    ]);
    // Both sides must see the connections: an agent drops a connection still in its handshake
    // when it starts draining.
    await waitFor(
      () => t.gw.registry.size === 2 && a.agent.ready && b.agent.ready,
      5000,
      "both agents connected",
    );
    const draining = b.agent.drain();
    await waitFor(() => [...t.gw.registry.all()].some((s) => s.info.agentId === "agent-b" && s.draining));
    for (let i = 0; i < 20; i++) {
      const r = await connectThrough(tlsProxy(t), backend.address);
      expect(await bodyText(await httpOver(r.socket, "/hello"))).toBe("hello from the backend");
    }
    // Each agent's own count of the dials it made (its admin port's /metrics).
    const served = (agent: RunningAgent) =>
      metricAt(
        `127.0.0.1:${agent.adminAddress.port}`,
        "konnectivity_network_proxy_agent_dial_duration_seconds_count",
      );
    expect(await served(b.agent)).toBe(0);
    expect(await served(a.agent)).toBe(20);
    expect(await draining).toBe("idle");
    await a.agent.stop();
    await b.agent.stop();
    await t.gw.close();
  });
});

describe("a server process that dies while our agent sends to it over gRPC", () => {
  // The mirror image of the stuck sessions Http2PeerWatch closes on the server: here a grpc-js
  // client session is writing when the server's reset arrives. Stuck, it would leave the agent
  // believing itself connected for up to --keepalive-time (1 h by default). Under load it does
  // happen (about one round in 20 with two CPU burners beside the test); the agent's
  // GrpcSocketWatch (lib/agent/transports/grpc-socket-watch.ts) destroys such connections.
  it("is dropped by the agent within a second or two, three times in a row", async () => {
    const pki = await getTestPki();
    for (let round = 1; round <= 3; round++) {
      const server = spawnKgwAnnouncing(["server", ...gatewayFlags(pki)]);
      const ports = await server.ports();
      const addresses = { frontend: { port: ports.frontend! }, agent: { port: ports.agent! } };
      const { agent } = await startTestAgent(pki, addresses.agent.port, ["--server-transport=grpc"]);
      await waitFor(() => agent.ready, 10_000, "agent connected over gRPC");

      // A download: the agent writes to the server as fast as the caller reads.
      const proxy: ProxyTarget = { kind: "tls", host: "127.0.0.1", port: addresses.frontend.port, pki };
      const r = await within(connectThrough(proxy, backend.address), 5000, "CONNECT");
      expect(r.status).toBe(200);
      r.socket.on("error", () => {});
      const res = await within(httpOver(r.socket, `/bytes?n=${1024 * 1024 * 1024}`), 5000, "response");
      res.on("error", () => {});
      let received = 0;
      res.on("data", (c: Buffer) => {
        received += c.length;
      });
      await waitFor(() => received > 4 * 1024 * 1024, 10_000, "download under way");

      const killedAt = Date.now();
      server.child.kill("SIGKILL");
      await waitFor(() => !agent.ready, 5000, `round ${round}: agent noticed the dead server`);
      expect(Date.now() - killedAt, `round ${round}`).toBeLessThan(2000);
      await within(server.exited, 5000, "killed server reaped");
      r.socket.destroy();
      await agent.stop();
    }
  });
});

describe("kgw server as a process", () => {
  it("exits 0 on SIGTERM, 1 when it cannot announce its ports, and 2 with a one-line error on a bad flag", async () => {
    const pki = await getTestPki();
    const server = spawnKgwAnnouncing(["server", ...gatewayFlags(pki)]);
    const ports = await server.ports();
    expect(Object.keys(ports).sort()).toEqual(["admin", "agent", "frontend", "health"]);
    expect(await httpGet(`127.0.0.1:${ports.health}`, "/healthz")).toMatchObject({ status: 200 });
    server.child.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });

    // Asked to announce its ports where it cannot: it stops, saying why, rather than run unseen.
    const unannounced = spawnKgw([
      "server",
      ...gatewayFlags(pki),
      "--ports-file=/nonexistent/kgw/ports.json",
    ]);
    expect(await unannounced.exited).toEqual({ code: 1, signal: null });
    expect(unannounced.output.join("")).toContain(
      "kgw server: --ports-file /nonexistent/kgw/ports.json: ENOENT",
    );

    const bad = spawnKgw(["server", "--keepalive-time=forever"]);
    expect((await bad.exited).code).toBe(2);
    const out = bad.output.join("");
    expect(out.trim().split("\n")).toHaveLength(1);
    expect(out).toContain("--keepalive-time");
  });
});
