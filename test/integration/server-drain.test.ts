/**
 * Drain advice (lib/tunnel/drain-advice.ts): a gateway that shuts down sends DRAIN to our agents,
 * which connect elsewhere before their draining connection closes, while the tunnels open on it
 * go on (make-before-break). Upstream-style agents, which never ask for it, get no DRAIN packet:
 * their stream is closed, as upstream's server does.
 */
import { once } from "node:events";
import { type AddressInfo, createServer, type Server, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Packet, PacketType } from "../../lib/proto/packet.js";
import { FrameDecoder, FrameType, TUNNEL_ALPN } from "../../lib/proto/tunnel-frames.js";
import { encodeHello, parseServerAnswer } from "../../lib/transport/tunnel-handshake.js";
import { DRAIN_HEADER, DRAIN_V1 } from "../../lib/tunnel/drain-advice.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { connectThrough, type ProxyTarget } from "../helpers/connect-client.js";
import { startTcpFront } from "../helpers/fleet.js";
import { AGENT_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { RawClient, responseHeaders, tlsCredentials } from "../helpers/grpc-clients.js";
import { PacketQueue } from "../helpers/packet-queue.js";
import { getTestPki } from "../helpers/pki.js";

let echo: Server;
let echoAddress: string;

/** Handles and requests alive in this process, by kind, for the leak check at the end. */
function resources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}
let baseline: Map<string, number>;

beforeAll(async () => {
  await getTestPki();
  baseline = resources();
  echo = createServer((s) => {
    s.on("error", () => {});
    s.pipe(s);
  });
  echo.listen(0, "127.0.0.1");
  await once(echo, "listening");
  echoAddress = `127.0.0.1:${(echo.address() as AddressInfo).port}`;
});

afterAll(async () => {
  echo.close();
  // Everything the tests opened is gone: sockets, servers, timers (drained connections included).
  await waitFor(
    () => [...resources()].every(([k, n]) => n <= (baseline.get(k) ?? 0)),
    5_000,
    "every socket, server and timer the tests opened closed",
  );
});

const frontendOf = (t: TestGateway): ProxyTarget => ({
  kind: "tls",
  host: "127.0.0.1",
  port: t.gw.addresses.frontend!.port,
  pki: t.pki,
});

/** Writes `text` and resolves with as many bytes read back (the backend echoes). */
function roundTrip(socket: Socket, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const onData = (c: Buffer) => {
      got += c.toString();
      if (got.length >= text.length) {
        socket.off("data", onData);
        socket.off("error", reject);
        resolve(got);
      }
    };
    socket.on("data", onData);
    socket.once("error", reject);
    socket.write(text);
  });
}

describe("a gateway that shuts down, with our agent behind a load balancer", () => {
  it.each([
    ["kgw-tunnel/1", "auto"],
    ["gRPC", "grpc"],
  ])("over %s: the agent connects elsewhere first, and its open tunnel goes on", async (_name, transport) => {
    const a = await startTestGateway(["--server-id=gw-a", "--graceful-shutdown-timeout=20s"]);
    const b = await startTestGateway(["--server-id=gw-b"]);
    // Sticky: every connection goes to A while A listens, to B once it no longer does.
    const front = await startTcpFront(() => [a.gw.addresses.agent.port, b.gw.addresses.agent.port], "sticky");
    const { agent, logs } = await startTestAgent(a.pki, front.port, [`--server-transport=${transport}`]);
    await waitFor(() => a.gw.ready && agent.ready, 10_000, "agent connected to A");
    const [onA] = [...a.gw.registry.all()];

    const tunnel = await connectThrough(frontendOf(a), echoAddress);
    expect(tunnel.status).toBe(200);
    expect(await roundTrip(tunnel.socket, "before")).toBe("before");

    // Who came first: the agent's new stream on B, or the end of its stream on A.
    const order: string[] = [];
    b.gw.registry.on("changed", () => {
      if (b.gw.registry.size > 0 && !order.includes("B connected")) order.push("B connected");
    });
    onA!.once("closed", () => order.push("A closed"));

    const shutdown = a.gw.shutdown();
    // B counts the agent before the agent has read B's answer: wait for the agent's own view.
    await waitFor(
      () => b.gw.ready && agent.state().connectedServers.includes("gw-b"),
      10_000,
      "agent connected to B",
    );
    expect(agent.state()).toMatchObject({ connectedServers: ["gw-b"], drainingServers: ["gw-a"] });
    expect(onA!.isClosed).toBe(false);

    // The tunnel on the draining connection still carries data, both ways.
    expect(await roundTrip(tunnel.socket, "during the drain")).toBe("during the drain");
    // New dials go through B.
    const viaB = await connectThrough(frontendOf(b), echoAddress);
    expect(await roundTrip(viaB.socket, "via B")).toBe("via B");
    viaB.socket.destroy();

    // The tunnel ends: the agent closes its draining connection, and A finishes its shutdown.
    const started = Date.now();
    tunnel.socket.end();
    await shutdown;
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(order).toEqual(["B connected", "A closed"]);
    await waitFor(() => agent.state().drainingServers.length === 0, 5_000, "draining connection closed");
    expect(agent.state().connectedServers).toEqual(["gw-b"]);
    expect(logs.some((l) => l.includes("proxy server is draining; connecting to another"))).toBe(true);

    await agent.stop();
    await front.close();
    await b.gw.close();
  });
});

/** A backend that holds each connection until `release()`, then sends `bytes` and closes. */
async function heldDownloads(bytes: number) {
  const held: Socket[] = [];
  let released = false;
  const send = (s: Socket) => {
    s.end(Buffer.alloc(bytes, 0x5a));
  };
  const server = createServer((s) => {
    s.on("error", () => {});
    s.resume();
    if (released) send(s);
    else held.push(s);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    get held() {
      return held.length;
    },
    release() {
      released = true;
      for (const s of held.splice(0)) send(s);
    },
    close: () => server.close(),
  };
}

/** Everything the caller reads from a tunnel, and how it ended. */
function readToEnd(socket: Socket): Promise<{ bytes: number; end: "clean" | string }> {
  return new Promise((resolve) => {
    let bytes = 0;
    let error: string | null = null;
    let clean = false;
    socket.on("data", (c: Buffer) => {
      bytes += c.length;
    });
    socket.on("end", () => {
      clean = true;
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.once("close", () => resolve({ bytes, end: error ?? (clean ? "clean" : "closed without FIN") }));
  });
}

describe("tunnels in flight on a draining gateway", () => {
  it.each([
    ["kgw-tunnel/1", "auto"],
    ["gRPC", "grpc"],
  ])("over %s: every transfer gets every byte and a clean end", async (_name, transport) => {
    const BYTES = 256 * 1024;
    const TUNNELS = 8;
    const backend = await heldDownloads(BYTES);
    const a = await startTestGateway(["--server-id=gw-a", "--graceful-shutdown-timeout=20s"]);
    const b = await startTestGateway(["--server-id=gw-b"]);
    const front = await startTcpFront(() => [a.gw.addresses.agent.port, b.gw.addresses.agent.port], "sticky");
    const { agent } = await startTestAgent(a.pki, front.port, [`--server-transport=${transport}`]);
    await waitFor(() => a.gw.ready && agent.ready, 10_000, "agent connected to A");

    const tunnels = await Promise.all(
      Array.from({ length: TUNNELS }, () => connectThrough(frontendOf(a), backend.address)),
    );
    expect(tunnels.map((t) => t.status)).toEqual(Array(TUNNELS).fill(200));
    const results = Promise.all(tunnels.map((t) => readToEnd(t.socket)));
    await waitFor(() => backend.held === TUNNELS, 5_000, "every tunnel at the backend");

    const shutdown = a.gw.shutdown();
    await waitFor(() => agent.state().drainingServers.includes("gw-a"), 10_000, "agent retired A");
    // The downloads run on the draining connection; the last one to finish leaves it idle.
    backend.release();
    expect(await results).toEqual(Array(TUNNELS).fill({ bytes: BYTES, end: "clean" }));
    await shutdown;
    await waitFor(() => agent.state().drainingServers.length === 0, 5_000, "draining connection closed");

    await agent.stop();
    await front.close();
    await b.gw.close();
    backend.close();
  });
});

describe("DRAIN on the wire", () => {
  it("is acknowledged and sent over gRPC to an agent that asks, never to one that does not", async () => {
    const t = await startTestGateway(["--graceful-shutdown-timeout=5s"]);
    const ours = new RawClient(t.agent, tlsCredentials(t.pki, "none"));
    const upstream = new RawClient(t.agent, tlsCredentials(t.pki, "none"));
    const auth = `Bearer ${AGENT_TOKEN}`;
    const oursCall = ours.connect({ agentid: "ours", authorization: auth, [DRAIN_HEADER]: DRAIN_V1 });
    const upstreamCall = upstream.connect({ agentid: "upstream", authorization: auth });
    const oursPackets = new PacketQueue(oursCall);
    const upstreamPackets = new PacketQueue(upstreamCall);
    const [oursHeaders, upstreamHeaders] = await Promise.all([
      responseHeaders(oursCall),
      responseHeaders(upstreamCall),
    ]);
    expect(oursHeaders.get(DRAIN_HEADER)).toEqual([DRAIN_V1]);
    expect(upstreamHeaders.get(DRAIN_HEADER)).toEqual([]);
    await waitFor(() => t.gw.registry.size === 2, 5000, "both agents registered");

    await t.gw.shutdown();
    await waitFor(() => oursPackets.ended && upstreamPackets.ended, 5000, "both streams ended");
    const types = (q: PacketQueue) => q.pending.map((p: Packet) => p.type);
    expect(types(oursPackets)).toContain(PacketType.DRAIN);
    expect(types(upstreamPackets)).not.toContain(PacketType.DRAIN);
    ours.close();
    upstream.close();
  });

  it("goes over kgw-tunnel/1 as a PACKET frame, and only when asked for", async () => {
    const t = await startTestGateway(["--graceful-shutdown-timeout=5s"]);
    /** A raw tunnel agent: its WELCOME headers, and the frames it receives until the end. */
    const rawAgent = async (agentId: string, extra: Record<string, string[]>) => {
      const s = tlsConnect({
        host: "127.0.0.1",
        port: t.gw.addresses.agent.port,
        servername: "localhost",
        ca: t.pki.ca.certPem,
        ALPNProtocols: [TUNNEL_ALPN],
      });
      await once(s, "secureConnect");
      s.write(
        encodeHello({
          agentid: [agentId],
          authorization: [`Bearer ${AGENT_TOKEN}`],
          "kgw-flow-control": ["credit-v1"],
          ...extra,
        }),
      );
      const decoder = new FrameDecoder();
      const frames: { type: number; payload: Buffer }[] = [];
      let ended = false;
      s.on("data", (c: Buffer) => {
        decoder.push(c);
        for (let f = decoder.next(); f; f = decoder.next()) if (f.kind === "frame") frames.push(f);
      });
      s.on("error", () => {});
      s.on("close", () => {
        ended = true;
      });
      await waitFor(() => frames.length > 0, 5000, "WELCOME");
      const first = frames.shift()!;
      const answer = parseServerAnswer({ kind: "frame", type: first.type as never, payload: first.payload });
      if (answer.kind !== "welcome") throw new Error(`refused: ${answer.message}`);
      return { headers: answer.headers, frames, ended: () => ended, socket: s };
    };
    const ours = await rawAgent("ours", { [DRAIN_HEADER]: [DRAIN_V1] });
    const plain = await rawAgent("plain", {});
    expect(ours.headers[DRAIN_HEADER]).toEqual([DRAIN_V1]);
    expect(plain.headers[DRAIN_HEADER]).toBeUndefined();
    await waitFor(() => t.gw.registry.size === 2, 5000, "both agents registered");

    await t.gw.shutdown();
    await waitFor(() => ours.ended() && plain.ended(), 5000, "both connections closed");
    const drainFrame = Buffer.from([0x08, PacketType.DRAIN, 0x42, 0x00]);
    const packets = (a: { frames: { type: number; payload: Buffer }[] }) =>
      a.frames.filter((f) => f.type === FrameType.PACKET).map((f) => f.payload.toString("hex"));
    expect(packets(ours)).toEqual([drainFrame.toString("hex")]);
    expect(packets(plain)).toEqual([]);
  });
});
