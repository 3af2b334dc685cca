/**
 * Clients that open TCP to a TLS listener and never finish the handshake (or send a byte every
 * few seconds): closed at the handshake timeout, capped per source and per listener, each
 * listener on its own budget, and, in a server held to 256 descriptors, unable to stop other
 * clients' dials. The caps' refusals are shown with --max-tls-handshakes-waiting=0 (nothing
 * waits: over a cap is reset at once); what waits, and for how long, is handshake-burst.test.ts. Floods come from other loopback addresses (127.0.0.2…) than the legitimate
 * agent and caller (127.0.0.1), as an attacker's would.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { bodyText, connectThrough, httpOver } from "../helpers/connect-client.js";
import { announcedPorts } from "../helpers/endpoints.js";
import { AGENT_TOKEN, gatewayFlags, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { spawnKgw } from "../helpers/kgw-process.js";
import { getTestPki } from "../helpers/pki.js";

let backend: HttpBackend;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  await getTestPki();
  backend = await startHttpBackend();
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});
afterAll(async () => {
  await backend.close();
});

interface Flood {
  sockets: Socket[];
  /** Sockets the server has closed so far. */
  closed(): number;
  end(): void;
}

/** `n` connections from `from` to `port` that never send a byte. */
function silentFlood(port: number, n: number, from: string): Flood {
  let closed = 0;
  const sockets: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = connect({ port, host: "127.0.0.1", localAddress: from });
    s.on("error", () => {});
    s.once("close", () => {
      closed++;
    });
    sockets.push(s);
  }
  const flood = {
    sockets,
    closed: () => closed,
    end: () => {
      for (const s of sockets) s.destroy();
    },
  };
  cleanup.push(flood.end);
  return flood;
}

async function gateway(flags: string[]): Promise<TestGateway> {
  const t = await startTestGateway(flags);
  cleanup.push(() => t.gw.close());
  return t;
}

/** Starts one more agent (from 127.0.0.1) and waits until the gateway counts it. */
async function withAgent(t: TestGateway): Promise<void> {
  const before = t.gw.registry.size;
  const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
  cleanup.push(() => agent.stop());
  await waitFor(() => t.gw.registry.size === before + 1, 5000, "agent connected");
}

/** One CONNECT dial and request through the mTLS frontend; the body, or the error. */
async function dial(t: TestGateway): Promise<string> {
  const r = await connectThrough(
    { kind: "tls", host: "127.0.0.1", port: t.gw.addresses.frontend!.port, pki: t.pki },
    backend.address,
  );
  if (r.status !== 200) {
    r.socket.destroy();
    return `status ${r.status}`;
  }
  return bodyText(await httpOver(r.socket, "/hello"));
}

async function rejected(t: TestGateway, listener: string, reason: string): Promise<number> {
  return (await rejectedBy(t, listener))[reason] ?? 0;
}

/** The connections `listener` rejected, by reason (only the reasons counted at least once). */
async function rejectedBy(t: TestGateway, listener: string): Promise<Record<string, number>> {
  const m = await t.gw.metrics.rejectedConnections.get();
  const by: Record<string, number> = {};
  for (const v of m.values) {
    if (v.labels.listener === listener && v.value > 0) by[String(v.labels.reason)] = v.value;
  }
  return by;
}

describe("TLS handshakes that never finish", () => {
  it("are closed at the handshake timeout, on the agent port and the frontend alike", async () => {
    const t = await gateway(["--tls-handshake-timeout=300ms"]);
    const onAgentPort = silentFlood(t.gw.addresses.agent.port, 20, "127.0.0.2");
    const onFrontend = silentFlood(t.gw.addresses.frontend!.port, 20, "127.0.0.2");
    await waitFor(() => onAgentPort.closed() === 20 && onFrontend.closed() === 20, 5000, "all closed");
    // Every one closed by its handshake's timeout, none by a limit.
    expect(await rejectedBy(t, "agent")).toEqual({ tls: 20 });
    expect(await rejectedBy(t, "frontend")).toEqual({ tls: 20 });
  });

  it("are closed at the timeout even when they trickle a byte at a time", async () => {
    const t = await gateway(["--tls-handshake-timeout=500ms"]);
    const flood = silentFlood(t.gw.addresses.agent.port, 5, "127.0.0.2");
    // A ClientHello that never completes: its first bytes, one every 100 ms.
    const hello = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);
    let sent = 0;
    const trickle = setInterval(() => {
      for (const s of flood.sockets) if (!s.destroyed) s.write(hello.subarray(sent, sent + 1));
      sent = Math.min(sent + 1, hello.length - 1);
    }, 100);
    cleanup.push(() => clearInterval(trickle));
    await waitFor(() => flood.closed() === 5, 5000, "trickling handshakes closed");
  });

  it("are capped per source: one address cannot spend the listener's budget", async () => {
    const t = await gateway(["--max-tls-handshakes-per-source=8", "--max-tls-handshakes-waiting=0"]);
    await withAgent(t);
    const flood = silentFlood(t.gw.addresses.agent.port, 20, "127.0.0.2");
    await waitFor(() => flood.closed() === 12, 3000, "the twelve over the limit closed");
    // Refused by the per-source limit: closed well within their 10 s handshake timeout.
    expect(await rejected(t, "agent", "handshakes_per_source")).toBe(12);
    // Another source still connects: a second agent, and a dial through the frontend.
    await withAgent(t);
    expect(await dial(t)).toBe("hello from the backend");
    // The eight within the limit are still waiting for their (10 s) handshake timeout.
    expect(flood.closed()).toBe(12);
    // Each refused connection is counted once, under the gate's reason (not again as a failed
    // handshake when Node's TLS server sees the reset).
    expect(await rejectedBy(t, "agent")).toEqual({ handshakes_per_source: 12 });
  });

  it("are capped per listener, and a flood on the agent port leaves the frontend's budget alone", async () => {
    const t = await gateway([
      "--max-tls-handshakes=10",
      "--max-tls-handshakes-per-source=0",
      "--max-tls-handshakes-waiting=0",
    ]);
    await withAgent(t);
    const flood = silentFlood(t.gw.addresses.agent.port, 10, "127.0.0.2");
    await waitFor(
      async () => (await t.gw.metrics.tlsHandshakes.get()).values[0]?.value === 10,
      3000,
      "ten held",
    );
    const more = silentFlood(t.gw.addresses.agent.port, 3, "127.0.0.3");
    await waitFor(() => more.closed() === 3, 3000, "refused over the listener's limit");
    expect(await rejected(t, "agent", "handshakes_in_progress")).toBe(3);
    // The frontend has its own ten.
    expect(await dial(t)).toBe("hello from the backend");
    // Once the flood ends, the agent port takes connections again.
    flood.end();
    await withAgent(t);
  });
});

describe("a server held to 256 descriptors", () => {
  it("keeps serving dials while 300 silent connections from one source hit its agent port", async () => {
    const pki = await getTestPki();
    const dir = mkdtempSync(path.join(tmpdir(), "kgw-fd-limit-"));
    cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
    const portsFile = path.join(dir, "ports.json");
    // prlimit: the limit of this child only (Node raises its soft limit to the hard one).
    const server = spawn(
      "prlimit",
      [
        "--nofile=256:256",
        process.execPath,
        "--import",
        "tsx",
        "test/helpers/kgw-entry.ts",
        "server",
        ...gatewayFlags(pki),
        `--ports-file=${portsFile}`,
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    server.stdout!.resume();
    server.stderr!.resume();
    cleanup.push(() => {
      server.kill("SIGKILL");
    });
    await waitFor(() => announcedPorts(portsFile) !== null, 15_000, "server listening");
    const ports = announcedPorts(portsFile)!;
    const [agentAddr, frontend, health] = [ports.agent, ports.frontend, ports.health].map((port) => ({
      port,
    }));
    const agent = spawnKgw([
      "agent",
      "--proxy-server-host=127.0.0.1",
      `--proxy-server-port=${agentAddr.port}`,
      "--server-name=localhost",
      `--ca-cert=${pki.files.caCert}`,
      `--agent-token=${AGENT_TOKEN}`,
      "--health-server-port=0",
      "--admin-server-port=0",
    ]);
    cleanup.push(() => {
      agent.child.kill("SIGKILL");
    });
    const ready = async () =>
      (await fetch(`http://127.0.0.1:${health.port}/readyz`).catch(() => null))?.ok ?? false;
    await waitFor(ready, 15_000, "agent connected");

    const flood = silentFlood(agentAddr.port, 300, "127.0.0.2");
    // The per-source limit (64) hold their descriptors, and as many again wait (a quarter of the
    // 256 descriptors, however many --max-tls-handshakes-waiting allows); the other 172 are
    // refused at once.
    await waitFor(() => flood.closed() === 172, 5000, "the flood beyond the per-source limit refused");
    const t = { gw: { addresses: { frontend } }, pki } as unknown as TestGateway;
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await dial(t));
    expect(answers).toEqual(Array(10).fill("hello from the backend"));
  });
});
