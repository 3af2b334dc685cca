/**
 * What sets off the scavenges that free short-lived read buffers, fed by real traffic:
 *  - the server's pacer (GatewayDeps.callerBytesRead, lib/transport/scavenge-pacer.ts): every byte
 *    a CONNECT caller sends through its tunnel is counted, and nothing a gRPC caller sends is.
 *    It is meant for the CONNECT callers' fresh read buffers only: scavenges set off by other
 *    traffic cost the gRPC paths what they gained on CONNECT (docs/PERFORMANCE.md, the pacer A/B);
 *  - the agent's dial scavenger (AgentDeps.dialReceived, lib/transport/dial-scavenger.ts): one look
 *    per dial the agent receives, whichever frontend it came from and whether or not it connects,
 *    and none for the data of open tunnels.
 */
import type { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { TunnelClient } from "../../lib/client/tunnel-client.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { connectThrough } from "../helpers/connect-client.js";
import { frontendClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

const BODY_BYTES = 3 * 1024 * 1024;
let baseline: Map<string, number>;
let t: TestGateway;
let agent: RunningAgent;
let backend: HttpBackend;
let grpc: TunnelClient;
let counted = 0;
let dialsSeen = 0;

beforeAll(async () => {
  baseline = activeResources();
  t = await startTestGateway([], { callerBytesRead: (bytes) => (counted += bytes) });
  backend = await startHttpBackend();
  ({ agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port, [], {
    dialReceived: () => dialsSeen++,
  }));
  await waitFor(() => t.gw.ready, 5000, "agent connected");
  grpc = frontendClient(t);
});

afterAll(async () => {
  grpc.close();
  await agent.stop();
  await t.gw.close();
  await backend.close();
  await expectNoLeakedResources(baseline);
});

/** POSTs BODY_BYTES to the backend's /sha256 over `socket`; resolves with the bytes written. */
async function upload(socket: Duplex): Promise<number> {
  const head = Buffer.from(
    `POST /sha256 HTTP/1.1\r\nHost: backend\r\nContent-Length: ${BODY_BYTES}\r\nConnection: close\r\n\r\n`,
  );
  const answer = new Promise<string>((resolve, reject) => {
    const chunks: Buffer[] = [];
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.once("end", () => resolve(Buffer.concat(chunks).toString()));
    socket.once("error", reject);
  });
  socket.write(head);
  // No end: a caller's FIN closes the whole tunnel (no half-close), before the answer.
  socket.write(Buffer.alloc(BODY_BYTES, 7));
  // The backend saw the whole body: everything the caller sent went through the tunnel.
  expect(await answer).toContain(`"bytes":${BODY_BYTES}`);
  socket.destroy();
  return head.length + BODY_BYTES;
}

/** A CONNECT tunnel to the backend through the gateway's frontend, answered 200. */
async function connectTunnel(): Promise<Duplex> {
  const r = await connectThrough(
    { kind: "tls", host: "127.0.0.1", port: t.gw.addresses.frontend!.port, pki: t.pki },
    backend.address,
  );
  expect(r.status).toBe(200);
  return r.socket;
}

describe("the bytes fed to the scavenge pacer", () => {
  it("are every byte a CONNECT caller sent through its tunnel", async () => {
    const before = counted;
    const sent = await upload(await connectTunnel());
    expect(counted - before).toBe(sent);
  });

  it("leave out what a gRPC caller sends", async () => {
    const before = counted;
    await upload(await grpc.dial(backend.address));
    expect(counted - before).toBe(0);
  });
});

describe("the dials fed to the agent's dial scavenger", () => {
  it("are one per dial, CONNECT or gRPC, and none for the data of an open tunnel", async () => {
    const before = dialsSeen;
    await upload(await connectTunnel());
    await upload(await grpc.dial(backend.address));
    expect(dialsSeen - before).toBe(2);
  });

  it("count a dial the agent refuses", async () => {
    const before = dialsSeen;
    // Nothing listens on port 1 of loopback: the agent's connect fails, and the caller is told.
    await expect(grpc.dial("127.0.0.1:1")).rejects.toThrow();
    expect(dialsSeen - before).toBe(1);
  });
});
