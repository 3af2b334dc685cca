/**
 * The agent port's kgw-tunnel/1 side, driven byte by byte: ALPN selection, the handshake's
 * answers to good, malformed, oversized, slow and unauthenticated input, and what a connected
 * tunnel does when its agent vanishes. gRPC on the same port is covered by server-protocol.
 */

import { once } from "node:events";
import { readFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { createServer as createTlsServer, type TLSSocket, connect as tlsConnect } from "node:tls";
import { status } from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import {
  type ControlFrame,
  encodeFrame,
  FrameDecoder,
  FrameType,
  TUNNEL_ALPN,
} from "../../lib/proto/tunnel-frames.js";
import { BackendRegistry } from "../../lib/server/core/backend-registry.js";
import { chooserFor } from "../../lib/server/core/proxy-strategies.js";
import { createAgentTunnelHandler } from "../../lib/server/listeners/agent-tunnel-handler.js";
import { staticAgentAuthenticator } from "../../lib/server/policy/agent-auth.js";
import { holdNothing } from "../../lib/server/policy/gateway-policy.js";
import { unlimitedQuotas } from "../../lib/server/policy/tenant-quotas.js";
import { encodeHello, parseServerAnswer, type ServerAnswer } from "../../lib/transport/tunnel-handshake.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { AGENT_TOKEN, captureLogger, startTestGateway, type TestGateway } from "../helpers/gateway.js";

let t: TestGateway;
const sockets: TLSSocket[] = [];

beforeAll(async () => {
  t = await startTestGateway();
});
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
});
afterAll(async () => {
  await t.gw.close();
});

async function dial(port: number, alpn = [TUNNEL_ALPN], cert?: "agent"): Promise<TLSSocket> {
  const s = tlsConnect({
    host: "127.0.0.1",
    port,
    servername: "localhost",
    ca: readFileSync(t.pki.files.caCert),
    ALPNProtocols: alpn,
    ...(cert ? { cert: readFileSync(t.pki.files.agentCert), key: readFileSync(t.pki.files.agentKey) } : {}),
  });
  sockets.push(s);
  s.on("error", () => {});
  await once(s, "secureConnect");
  return s;
}

const agentPort = () => t.gw.addresses.agent.port;

/** Reads the server's first frame; resolves null if the connection closes without one. */
function firstFrame(s: TLSSocket): Promise<ControlFrame | null> {
  const d = new FrameDecoder();
  return new Promise((resolve) => {
    s.on("data", (chunk: Buffer) => {
      d.push(chunk);
      const f = d.next();
      if (f?.kind === "frame") resolve(f);
    });
    s.once("close", () => resolve(null));
  });
}

async function answer(s: TLSSocket): Promise<ServerAnswer> {
  const f = await firstFrame(s);
  if (!f) throw new Error("closed without an answer");
  return parseServerAnswer(f);
}

const closed = (s: TLSSocket) => (s.destroyed ? Promise.resolve() : once(s, "close").then(() => {}));

describe("ALPN on the agent port", () => {
  it("chooses kgw-tunnel/1 when the agent offers it, and h2 for everyone else", async () => {
    expect((await dial(agentPort(), [TUNNEL_ALPN, "h2"])).alpnProtocol).toBe(TUNNEL_ALPN);
    expect((await dial(agentPort(), ["h2"])).alpnProtocol).toBe("h2");
  });

  it("connects our agent over the tunnel, and over gRPC when told to", async () => {
    for (const [flags, transport] of [
      [[], "tunnel"],
      [["--server-transport=grpc"], "grpc"],
    ] as const) {
      const { agent } = await startTestAgent(t.pki, agentPort(), [...flags]);
      await waitFor(() => agent.ready, 5000, "agent ready");
      const line = t.logs.filter((l) => l.includes('"agent connected"')).at(-1) ?? "";
      expect(JSON.parse(line)).toMatchObject({ agentId: agent.agentId, transport });
      await agent.stop();
      await waitFor(() => t.gw.registry.size === 0, 5000, "agent gone");
    }
  });
});

describe("tunnel handshake", () => {
  it("welcomes an authenticated agent with serverID, serverCount and credit flow control", async () => {
    const s = await dial(agentPort());
    s.write(encodeHello({ agentid: ["raw-agent"], authorization: [`Bearer ${AGENT_TOKEN}`] }));
    expect(await answer(s)).toEqual({
      kind: "welcome",
      headers: {
        serverid: [expect.stringMatching(/./)],
        servercount: ["1"],
        "kgw-flow-control": ["credit-v1"],
      },
    });
    await waitFor(() => t.gw.registry.size === 1, 5000, "agent registered");
    // A vanished agent is noticed at once (EOF), not after a keepalive.
    s.destroy();
    await waitFor(() => t.gw.registry.size === 0, 1000, "agent removed");
  });

  it("welcomes an agent proving itself with a client certificate", async () => {
    const s = await dial(agentPort(), [TUNNEL_ALPN], "agent");
    s.write(encodeHello({ agentid: ["cert-agent"] }));
    expect((await answer(s)).kind).toBe("welcome");
  });

  it.each([
    [
      "a wrong token",
      { agentid: ["a"], authorization: ["Bearer nope"] },
      status.UNAUTHENTICATED,
      /invalid agent token/,
    ],
    [
      "no credentials",
      { agentid: ["a"] },
      status.UNAUTHENTICATED,
      /no valid client certificate or bearer token/,
    ],
    [
      "no agent ID",
      { authorization: [`Bearer ${AGENT_TOKEN}`] },
      status.INVALID_ARGUMENT,
      /exactly one agentid/,
    ],
    [
      "two agent IDs",
      { agentid: ["a", "b"], authorization: [`Bearer ${AGENT_TOKEN}`] },
      status.INVALID_ARGUMENT,
      /exactly one/,
    ],
  ])("refuses %s with the gRPC code gRPC would use, then closes", async (_name, md, code, message) => {
    const s = await dial(agentPort());
    s.write(encodeHello(md));
    const a = await answer(s);
    expect(a).toMatchObject({ kind: "refused", code });
    expect((a as { message: string }).message).toMatch(message);
    await closed(s);
    expect(t.gw.registry.size).toBe(0);
  });

  it.each([
    ["bytes that are not a frame", Buffer.from("GET / HTTP/1.1\r\n\r\n"), /unknown tunnel frame type/],
    ["a HELLO that is not JSON", encodeFrame(FrameType.HELLO, Buffer.from("{{")), /not valid JSON/],
    [
      "DATA before the handshake",
      Buffer.concat([Buffer.from([5, 0, 0, 0, 9]), Buffer.alloc(9)]),
      /DATA before/,
    ],
    ["a PACKET before the handshake", encodeFrame(FrameType.PACKET, Buffer.alloc(2)), /expected HELLO/],
  ])("refuses %s as INVALID_ARGUMENT", async (_name, wire, message) => {
    const s = await dial(agentPort());
    s.write(wire);
    const a = await answer(s);
    expect(a).toMatchObject({ kind: "refused", code: status.INVALID_ARGUMENT });
    expect((a as { message: string }).message).toMatch(message);
    await closed(s);
  });

  it("refuses an oversized HELLO from its header alone, without waiting for the payload", async () => {
    const s = await dial(agentPort());
    const header = Buffer.from([FrameType.HELLO, 0, 0x10, 0, 0]); // 1 MiB announced, none sent
    s.write(header);
    const a = await answer(s);
    expect(a).toMatchObject({ kind: "refused", code: status.INVALID_ARGUMENT });
    expect((a as { message: string }).message).toMatch(/over the limit/);
  });
});

describe("a slow or silent client", () => {
  it("is refused and closed once the handshake timeout passes", async () => {
    const { log } = captureLogger();
    const metrics = new ServerMetrics();
    const registry = new BackendRegistry(chooserFor(["default"]));
    const handler = createAgentTunnelHandler(
      {
        serverId: "s1",
        serverCount: () => 1,
        dialTimeoutMs: 1000,
        liveness: { probeIntervalMs: 0, answerTimeoutMs: 0, deadAfterMs: 0 },
        authenticate: staticAgentAuthenticator({ tokenHashes: [], acceptCertificates: false }),
        hold: holdNothing,
        quotas: unlimitedQuotas,
        registry,
        accepting: () => true,
        log,
        metrics,
      },
      { handshakeTimeoutMs: 150, keepaliveMs: 0, keepaliveTimeoutMs: 1000 },
    );
    const server = createTlsServer({
      cert: readFileSync(t.pki.files.serverCert),
      key: readFileSync(t.pki.files.serverKey),
      ALPNProtocols: [TUNNEL_ALPN],
    });
    server.on("secureConnection", (s) => void handler(s));
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const s = await dial((server.address() as AddressInfo).port);
      // Half a HELLO, then nothing.
      s.write(encodeHello({ agentid: ["slow"] }).subarray(0, 8));
      const started = Date.now();
      const a = await answer(s);
      expect(a).toMatchObject({ kind: "refused", code: status.INVALID_ARGUMENT });
      expect((a as { message: string }).message).toMatch(/no tunnel handshake within 150ms/);
      await closed(s);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(registry.size).toBe(0);
    } finally {
      server.close();
    }
  });
});
