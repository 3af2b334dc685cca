/**
 * A proxy server that stops answering without disconnecting (SIGSTOP: a frozen process, a hung
 * VM) while our agent has a stream on it. Its kernel keeps the TCP connection and even completes
 * new TCP handshakes, so nothing closes and new connections hang in TLS. The agent must notice
 * the silence with its own PINGs (kgw-tunnel/1's, or HTTP/2's once it knows the server is ours),
 * drop that stream and connect elsewhere within seconds, while the server is still frozen, with
 * the agent's own timings (--sync-interval and the handshake timeout at their defaults).
 */
import { once } from "node:events";
import { type AddressInfo, createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { closedPort } from "../helpers/backends.js";
import { connectThrough } from "../helpers/connect-client.js";
import { startTcpFront } from "../helpers/fleet.js";
import { gatewayFlags } from "../helpers/gateway.js";
import { type KgwProcess, spawnKgw } from "../helpers/kgw-process.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

/**
 * How long the agent may take to be on another server after the freeze: its PING after 5 s of
 * silence, 3 s for the answer, then a reconnect within --sync-interval, with a hedge after 1 s if
 * that lands on the frozen server. The issue this guards against kept a tenant away for 20 s.
 */
const MOVED_WITHIN_MS = 15_000;

let pki: TestPki;
let echo: Server;
let echoAddress: string;
const cleanup: Array<() => unknown> = [];

/** Handles and requests alive in this process, by kind, for the leak check at the end. */
function resources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}
let baseline: Map<string, number>;
const noLeakedHandles = () =>
  waitFor(
    () => [...resources()].every(([k, n]) => n <= (baseline.get(k) ?? 0)),
    5_000,
    "every socket, server and timer the test opened closed",
  );

beforeAll(async () => {
  pki = await getTestPki();
  baseline = resources();
  echo = createServer((s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
  echo.listen(0, "127.0.0.1");
  await once(echo, "listening");
  echoAddress = `127.0.0.1:${(echo.address() as AddressInfo).port}`;
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});
afterAll(async () => {
  echo.close();
  await noLeakedHandles();
});

interface ServerProcess {
  id: string;
  agentPort: number;
  frontendPort: number;
  proc: KgwProcess;
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s: Socket = netConnect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** A `kgw server` process; killed (after SIGCONT) at teardown. */
async function serverProcess(id: string, extra: string[] = []): Promise<ServerProcess> {
  const agentPort = await closedPort();
  const frontendPort = await closedPort();
  const proc = spawnKgw([
    "server",
    ...gatewayFlags(pki),
    `--agent-port=${agentPort}`,
    `--server-port=${frontendPort}`,
    `--server-id=${id}`,
    ...extra,
  ]);
  cleanup.push(() => {
    proc.child.kill("SIGCONT");
    proc.child.kill("SIGKILL");
    return proc.exited;
  });
  await waitFor(
    async () => (await accepts(agentPort)) && (await accepts(frontendPort)),
    20_000,
    `${id} listening`,
  );
  return { id, agentPort, frontendPort, proc };
}

async function agentBehind(servers: ServerProcess[], transport: "auto" | "grpc"): Promise<RunningAgent> {
  // Round-robin, as a network load balancer spreads new connections.
  const front = await startTcpFront(() => servers.map((s) => s.agentPort), "round-robin");
  cleanup.push(() => front.close());
  const { agent } = await startTestAgent(pki, front.port, [
    `--server-transport=${transport}`,
    // The defaults, not the test helper's fast ones: the agent's own timings are under test.
    "--sync-interval=1s",
    "--sync-interval-cap=10s",
    "--probe-interval=1s",
  ]);
  cleanup.push(() => agent.stop());
  return agent;
}

async function echoThrough(server: ServerProcess, text: string): Promise<string> {
  const tunnel = await connectThrough(
    { kind: "tls", host: "127.0.0.1", port: server.frontendPort, pki },
    echoAddress,
  );
  expect(tunnel.status).toBe(200);
  const got = await new Promise<string>((resolve, reject) => {
    let data = "";
    tunnel.socket.on("data", (d: Buffer) => {
      data += d.toString();
      if (data.length >= text.length) resolve(data);
    });
    tunnel.socket.once("error", reject);
    tunnel.socket.write(text);
  });
  tunnel.socket.destroy();
  return got;
}

describe("a proxy server frozen under the agent", () => {
  it("over kgw-tunnel/1: the agent drops its only stream and serves through another server", async () => {
    const servers = [await serverProcess("gw-a"), await serverProcess("gw-b")];
    const agent = await agentBehind(servers, "auto");
    await waitFor(() => agent.state().connectedServers.length === 1, 15_000, "agent connected");
    const frozen = servers.find((s) => s.id === agent.state().connectedServers[0])!;
    const live = servers.find((s) => s !== frozen)!;

    frozen.proc.child.kill("SIGSTOP");
    await waitFor(
      () => agent.state().connectedServers.join() === live.id,
      MOVED_WITHIN_MS,
      `agent on ${live.id} while ${frozen.id} is frozen`,
    );
    // The tenant is reachable again, through the live server, before the frozen one runs again.
    expect(await echoThrough(live, "still here")).toBe("still here");
  }, 60_000);

  it("over gRPC: a stream to a server known to be ours is PINGed, and dropped when it goes silent", async () => {
    // Two streams each (serverCount 2): the first tells the agent the servers are ours, so the
    // second carries HTTP/2 PINGs; that is the one whose server freezes.
    const servers = [
      await serverProcess("gw-a", ["--server-count=2"]),
      await serverProcess("gw-b", ["--server-count=2"]),
    ];
    const agent = await agentBehind(servers, "grpc");
    await waitFor(() => agent.state().connectedServers.length === 2, 15_000, "agent on both servers");
    const [first, second] = agent.state().connectedServers;
    const frozen = servers.find((s) => s.id === second)!;

    frozen.proc.child.kill("SIGSTOP");
    await waitFor(
      () => agent.state().connectedServers.join() === first,
      MOVED_WITHIN_MS,
      `stream to ${frozen.id} dropped while it is frozen`,
    );
  }, 60_000);
});
