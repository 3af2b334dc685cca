/**
 * Agents that stop answering without disconnecting (SIGSTOP: a hung node, a frozen VM). The
 * gateway must notice within seconds, send new dials elsewhere or refuse them at once, keep the
 * frozen agent's open tunnels through a short freeze, and disconnect it only after the liveness
 * timeout. Times are scaled down by flags (--agent-probe-interval=200ms, timeout of seconds);
 * the defaults (5 s, 60 s) keep the same proportions.
 */
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/agent.js";
import { BROKEN_TUNNEL_ERRORS, connectThrough } from "../helpers/connect-client.js";
import { AGENT_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type KgwProcess, spawnKgw } from "../helpers/kgw-process.js";
import { getTestPki } from "../helpers/pki.js";

/** An echo server: a backend that keeps an idle connection open as long as the caller does. */
let backend: Server;
let backendAddress: string;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  await getTestPki();
  backend = createServer((s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => backend.listen(0, "127.0.0.1", r));
  backendAddress = `127.0.0.1:${(backend.address() as AddressInfo).port}`;
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});
afterAll(async () => {
  await new Promise((r) => backend.close(r));
});

async function gateway(livenessTimeout: string): Promise<TestGateway> {
  const t = await startTestGateway([
    "--agent-probe-interval=200ms",
    `--agent-liveness-timeout=${livenessTimeout}`,
  ]);
  cleanup.push(() => t.gw.close());
  return t;
}

/** Our agent as a child process (so it can be frozen), connected before this returns. */
async function agentProcess(t: TestGateway, transport: "auto" | "grpc"): Promise<KgwProcess> {
  const before = t.gw.registry.size;
  const agent = spawnKgw([
    "agent",
    "--proxy-server-host=127.0.0.1",
    `--proxy-server-port=${t.gw.addresses.agent.port}`,
    "--server-name=localhost",
    `--ca-cert=${t.pki.files.caCert}`,
    `--agent-token=${AGENT_TOKEN}`,
    `--server-transport=${transport}`,
    "--health-server-port=0",
    "--admin-server-port=0",
    "--sync-interval=100ms",
    "--sync-interval-cap=200ms",
  ]);
  cleanup.push(() => {
    agent.child.kill("SIGCONT");
    agent.child.kill("SIGKILL");
    return agent.exited;
  });
  await waitFor(() => t.gw.registry.size === before + 1, 15_000, "agent connected");
  return agent;
}

/** A CONNECT tunnel to the echo backend. */
async function openTunnel(t: TestGateway): Promise<{ status: number; socket: Socket; elapsedMs: number }> {
  const started = Date.now();
  const r = await connectThrough(
    { kind: "tls", host: "127.0.0.1", port: t.gw.addresses.frontend!.port, pki: t.pki },
    backendAddress,
  );
  return { status: r.status, socket: r.socket, elapsedMs: Date.now() - started };
}

/** Sends `text` through a tunnel to the echo backend; resolves once it has come back. */
function echo(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const onEnd = () => reject(new Error(`the tunnel ended after ${JSON.stringify(got)}`));
    const onData = (d: Buffer) => {
      got += d.toString();
      if (got.length < text.length) return;
      socket.off("data", onData);
      socket.off("end", onEnd);
      resolve(got);
    };
    socket.on("data", onData);
    socket.once("end", onEnd);
    socket.once("error", reject);
    socket.write(text);
  });
}

const unresponsive = async (t: TestGateway) =>
  (await t.gw.metrics.unresponsiveAgents.get()).values[0]?.value ?? 0;

describe.each(["auto", "grpc"] as const)(
  "an agent frozen for a moment (--server-transport=%s)",
  (transport) => {
    it("gets no new dials within seconds, keeps its open tunnel, and serves again once it answers", async () => {
      const t = await gateway("5s");
      const agent = await agentProcess(t, transport);
      const tunnel = await openTunnel(t);
      expect(tunnel.status).toBe(200);
      expect(await echo(tunnel.socket, "before")).toBe("before");

      agent.child.kill("SIGSTOP");
      const frozenAt = Date.now();
      await waitFor(() => !t.gw.ready, 3000, "the gateway notices");
      expect(await unresponsive(t)).toBe(1);
      const health = await fetch(`http://${t.health}/readyz`);
      expect(health.status).toBe(503);
      // A new dial is refused at once instead of waiting out the dial timeout on a frozen agent.
      const refused = await openTunnel(t);
      expect(refused.status).toBe(503);
      expect(refused.elapsedMs).toBeLessThan(1000);
      refused.socket.destroy();

      // Frozen for longer than it took to notice, well short of the liveness timeout.
      await waitFor(() => Date.now() - frozenAt > 2000, 3000, "the freeze lasting");
      agent.child.kill("SIGCONT");
      await waitFor(() => t.gw.ready, 3000, "the agent answers again");
      expect(await unresponsive(t)).toBe(0);
      expect(await echo(tunnel.socket, "after the freeze")).toBe("after the freeze");
      const again = await openTunnel(t);
      expect(again.status).toBe(200);
      expect(await echo(again.socket, "new")).toBe("new");
      tunnel.socket.destroy();
      again.socket.destroy();
    });
  },
);

describe("an agent frozen among others", () => {
  it("leaves new dials to the agents that answer", async () => {
    const t = await gateway("10s");
    const frozen = await agentProcess(t, "auto");
    await agentProcess(t, "grpc");
    frozen.child.kill("SIGSTOP");
    await waitFor(async () => (await unresponsive(t)) === 1, 3000, "the frozen agent noticed");
    expect(t.gw.ready).toBe(true);
    for (let i = 0; i < 10; i++) {
      const tunnel = await openTunnel(t);
      expect(tunnel.status).toBe(200);
      expect(await echo(tunnel.socket, `dial ${i}`)).toBe(`dial ${i}`);
      tunnel.socket.destroy();
    }
  });
});

describe("an agent frozen past --agent-liveness-timeout", () => {
  it("is disconnected, its tunnels end with an error, and it comes back once it runs again", async () => {
    const t = await gateway("1500ms");
    const agent = await agentProcess(t, "auto");
    const tunnel = await openTunnel(t);
    expect(await echo(tunnel.socket, "before")).toBe("before");
    const ended = new Promise<string>((resolve) => {
      tunnel.socket.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
      tunnel.socket.once("end", () => resolve("end"));
    });
    agent.child.kill("SIGSTOP");
    await waitFor(() => t.gw.registry.size === 0, 5000, "the agent disconnected");
    expect(BROKEN_TUNNEL_ERRORS).toContain(await ended);
    expect(t.gw.activeTunnels).toBe(0);
    agent.child.kill("SIGCONT");
    await waitFor(() => t.gw.registry.size === 1 && t.gw.ready, 10_000, "the agent reconnected");
  });
});
