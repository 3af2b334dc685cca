/**
 * The server's side of the tunnel protocol, driven packet by packet: a scripted agent and a raw
 * frontend client around a real gateway on loopback.
 */
import { status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodePacket } from "../../lib/proto/codec.js";
import {
  closeDial,
  closeRequest,
  closeResponse,
  dataPacket,
  dialRequest,
  dialResponse,
  type Packet,
  PacketType,
} from "../../lib/proto/packet.js";
import { AGENT_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { type PacketCall, RawClient, responseHeaders, tlsCredentials } from "../helpers/grpc-clients.js";
import { isType, PacketQueue } from "../helpers/packet-queue.js";

let t: TestGateway;
const clients: RawClient[] = [];

function client(target: string, who: Parameters<typeof tlsCredentials>[1]): RawClient {
  const c = new RawClient(target, tlsCredentials(t.pki, who));
  clients.push(c);
  return c;
}

interface ScriptedAgent {
  call: PacketCall;
  packets: PacketQueue;
  headers: Record<string, unknown>;
}

async function connectAgent(agentId: string, extra: Record<string, string> = {}): Promise<ScriptedAgent> {
  const call = client(t.agent, "none").connect({
    agentid: agentId,
    authorization: `Bearer ${AGENT_TOKEN}`,
    ...extra,
  });
  const packets = new PacketQueue(call);
  const md = await responseHeaders(call);
  await waitFor(() => t.gw.registry.size > 0);
  return { call, packets, headers: md.getMap() };
}

function frontend(): { call: PacketCall; packets: PacketQueue } {
  const call = client(t.frontend, "frontend").proxy();
  return { call, packets: new PacketQueue(call) };
}

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

function endCall(call: PacketCall): Promise<void> {
  return new Promise((resolve) => {
    call.on("error", () => {});
    call.once("status", () => resolve());
    call.cancel();
  });
}

beforeAll(async () => {
  t = await startTestGateway(["--backend-dial-timeout=1500ms"]);
});

afterAll(async () => {
  for (const c of clients) c.close();
  await t.gw.close();
});

describe("agent stream", () => {
  it("answers with serverID and serverCount headers", async () => {
    const agent = await connectAgent("agent-headers");
    expect(agent.headers.serverid).toBe(t.gw.addresses && String(agent.headers.serverid));
    expect(agent.headers.servercount).toBe("1");
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });
});

describe("per-connection flow control negotiation", () => {
  it("is not offered to an agent that does not ask (upstream agents)", async () => {
    const agent = await connectAgent("agent-plain");
    expect(agent.headers["kgw-flow-control"]).toBeUndefined();
    // Bytes from a caller reach the agent with no credit packets around them.
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 21n));
    const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
    agent.call.write(dialResponse(req.random, 22n));
    const rsp = await fe.packets.next(isType(PacketType.DIAL_RSP));
    for (let i = 0; i < 40; i++) fe.call.write(dataPacket(rsp.connectId, Buffer.alloc(64 * 1024)));
    agent.call.write(dataPacket(22n, Buffer.alloc(1024 * 1024)));
    for (let i = 0; i < 40; i++) await agent.packets.next(isType(PacketType.DATA));
    await fe.packets.next(isType(PacketType.DATA));
    expect(agent.packets.pending.some((p) => p.type === PacketType.KGW_CREDIT)).toBe(false);
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("is accepted from an agent that offers it, and credit flows back as the caller reads", async () => {
    const agent = await connectAgent("agent-credit", { "kgw-flow-control": "credit-v1" });
    expect(agent.headers["kgw-flow-control"]).toBe("credit-v1");
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 23n));
    const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
    agent.call.write(dialResponse(req.random, 24n));
    await fe.packets.next(isType(PacketType.DIAL_RSP));
    agent.call.write(dataPacket(24n, Buffer.alloc(512 * 1024)));
    const granted = await agent.packets.next(isType(PacketType.KGW_CREDIT));
    expect(granted.connectId).toBe(24n);
    expect(granted.bytes).toBeGreaterThan(0n);
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("closes only the connection whose agent overruns its window", async () => {
    const agent = await connectAgent("agent-overrun", { "kgw-flow-control": "credit-v1" });
    const fe = frontend();
    const ids: bigint[] = [];
    for (const [random, connectId] of [
      [25n, 26n],
      [27n, 28n],
    ] as const) {
      fe.call.write(dialRequest("10.0.0.1:80", random));
      const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
      agent.call.write(dialResponse(req.random, connectId));
      ids.push((await fe.packets.next(isType(PacketType.DIAL_RSP))).connectId);
    }
    // The caller does not read; the agent ignores the window and keeps sending on connection 26.
    fe.call.pause();
    // More than the window plus everything the caller's own buffers can absorb.
    for (let i = 0; i < 48; i++) agent.call.write(dataPacket(26n, Buffer.alloc(256 * 1024)));
    expect((await agent.packets.next(isType(PacketType.CLOSE_REQ))).connectId).toBe(26n);
    fe.call.resume();
    const closed = await fe.packets.next((p): p is Packet => p.type === PacketType.CLOSE_RSP);
    expect(closed).toMatchObject({ connectId: ids[0], error: expect.stringMatching(/window/) });
    // The other connection is untouched.
    agent.call.write(dataPacket(28n, Buffer.from("still here")));
    const data = await fe.packets.next(
      (p): p is Packet => p.type === PacketType.DATA && p.connectId === ids[1],
    );
    expect(data).toBeDefined();
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });
});

describe("dial and data through a scripted agent", () => {
  it("relays DIAL_REQ, DIAL_RSP, DATA both ways and CLOSE", async () => {
    const agent = await connectAgent("agent-a");
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:10250", 77n));
    const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
    expect(req.address).toBe("10.0.0.1:10250");
    expect(req.protocol).toBe("tcp");
    agent.call.write(dialResponse(req.random, 900n));
    const rsp = await fe.packets.next(isType(PacketType.DIAL_RSP));
    expect(rsp.error).toBe("");
    expect(rsp.random).toBe(77n);
    expect(rsp.connectId).toBeGreaterThan(0n);

    fe.call.write(dataPacket(rsp.connectId, Buffer.from("ping")));
    const up = await agent.packets.next(isType(PacketType.DATA));
    expect(up.connectId).toBe(900n);
    expect(Buffer.from(up.data).toString()).toBe("ping");

    agent.call.write(dataPacket(900n, Buffer.from("pong")));
    const down = await fe.packets.next(isType(PacketType.DATA));
    expect(down.connectId).toBe(rsp.connectId);
    expect(Buffer.from(down.data).toString()).toBe("pong");

    fe.call.write(closeRequest(rsp.connectId));
    expect((await agent.packets.next(isType(PacketType.CLOSE_REQ))).connectId).toBe(900n);
    expect(await fe.packets.next(isType(PacketType.CLOSE_RSP))).toEqual(closeResponse(rsp.connectId));
    agent.call.write(closeResponse(900n));
    await waitFor(() => t.gw.activeTunnels === 0);
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });
});

describe("dial failures reach the caller at once", () => {
  it("answers DIAL_RSP with an error when no agent is connected", async () => {
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 5n));
    const rsp = await fe.packets.next(isType(PacketType.DIAL_RSP));
    expect(rsp.random).toBe(5n);
    expect(rsp.error).toMatch(/no agent/);
    await endCall(fe.call);
  });

  it("passes the agent's dial error through", async () => {
    const agent = await connectAgent("agent-refuse");
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:1", 6n));
    const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
    agent.call.write(dialResponse(req.random, 0n, "dial tcp 10.0.0.1:1: connect: connection refused"));
    const rsp = await fe.packets.next(isType(PacketType.DIAL_RSP));
    expect(rsp.error).toContain("connection refused");
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("fails a pending dial as soon as its agent disconnects", async () => {
    const agent = await connectAgent("agent-vanishes");
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 8n));
    await agent.packets.next(isType(PacketType.DIAL_REQ));
    await endCall(agent.call);
    // Failed by the disconnect, not left to the dial timeout (which would say so).
    const rsp = await fe.packets.next(isType(PacketType.DIAL_RSP));
    expect(rsp.error).toMatch(/disconnected/);
    await endCall(fe.call);
  });

  it("times out a dial the agent never answers and cancels it at the agent", async () => {
    const agent = await connectAgent("agent-silent");
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 9n));
    const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
    const rsp = await fe.packets.next(isType(PacketType.DIAL_RSP), 5000);
    expect(rsp.error).toMatch(/timed out/);
    expect((await agent.packets.next(isType(PacketType.DIAL_CLS))).random).toBe(req.random);
    // The answer arrives late: the orphan connection is closed at the agent, not leaked.
    agent.call.write(dialResponse(req.random, 55n));
    expect((await agent.packets.next(isType(PacketType.CLOSE_REQ))).connectId).toBe(55n);
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("forwards the caller's DIAL_CLS to the agent", async () => {
    const agent = await connectAgent("agent-cls");
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 10n));
    const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
    fe.call.write(closeDial(10n));
    expect((await agent.packets.next(isType(PacketType.DIAL_CLS))).random).toBe(req.random);
    await expect(t.gw.metrics.pendingDials.get()).resolves.toMatchObject({ values: [{ value: 0 }] });
    await endCall(fe.call);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("closes every connection of a lost agent towards its callers within a second", async () => {
    const agent = await connectAgent("agent-lost");
    const fe = frontend();
    const ids: bigint[] = [];
    for (let i = 1n; i <= 3n; i++) {
      fe.call.write(dialRequest("10.0.0.1:80", i * 100n));
      const req = await agent.packets.next(isType(PacketType.DIAL_REQ));
      agent.call.write(dialResponse(req.random, i));
      ids.push((await fe.packets.next(isType(PacketType.DIAL_RSP))).connectId);
    }
    await endCall(agent.call);
    for (const id of ids) {
      const rsp = await fe.packets.next(
        (p): p is Packet => p.type === PacketType.CLOSE_RSP && p.connectId === id,
      );
      expect(rsp).toMatchObject({ error: expect.stringMatching(/disconnected/) });
    }
    await waitFor(() => t.gw.activeTunnels === 0);
    await endCall(fe.call);
  });
});

describe("bad input closes only what it must", () => {
  it("answers DATA and CLOSE_REQ for an unknown connectID with CLOSE_RSP errors", async () => {
    const fe = frontend();
    fe.call.write(dataPacket(4242n, Buffer.from("x")));
    expect(await fe.packets.next(isType(PacketType.CLOSE_RSP))).toEqual(
      closeResponse(4242n, "unknown connectID 4242"),
    );
    fe.call.write(closeRequest(4243n));
    expect((await fe.packets.next(isType(PacketType.CLOSE_RSP))).error).toMatch(/unknown connectID/);
    await endCall(fe.call);
  });

  it("answers DATA from an agent for an unknown connection with CLOSE_REQ", async () => {
    const agent = await connectAgent("agent-stray");
    agent.call.write(dataPacket(31n, Buffer.from("stray")));
    expect((await agent.packets.next(isType(PacketType.CLOSE_REQ))).connectId).toBe(31n);
    await endCall(agent.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("ignores unknown packet types from both sides and keeps serving", async () => {
    const raw = client(t.agent, "none").connectRaw({
      agentid: "agent-future",
      authorization: `Bearer ${AGENT_TOKEN}`,
    });
    const agentPackets = new PacketQueue(raw);
    await responseHeaders(raw);
    await waitFor(() => t.gw.registry.size === 1);
    raw.write(Buffer.from([0x08, 0x63])); // a packet of type 99, from a newer peer
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 11n));
    const req = await agentPackets.next(isType(PacketType.DIAL_REQ));
    raw.write(encodePacket(dialResponse(req.random, 12n)));
    expect((await fe.packets.next(isType(PacketType.DIAL_RSP))).error).toBe("");
    expect(t.logs.some((l) => l.includes("ignoring unexpected packet from agent"))).toBe(true);
    await endCall(fe.call);
    await endCall(raw as unknown as PacketCall);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("ends only the agent stream that sends a malformed packet", async () => {
    const good = await connectAgent("agent-good");
    const raw = client(t.agent, "none").connectRaw({
      agentid: "agent-bad",
      authorization: `Bearer ${AGENT_TOKEN}`,
    });
    await responseHeaders(raw);
    await waitFor(() => t.gw.registry.size === 2);
    raw.write(Buffer.from([0x22, 0x7f, 0x01])); // length runs past the message
    await expect(new Promise((_r, reject) => raw.on("error", reject))).rejects.toMatchObject({
      code: expect.any(Number),
    });
    await waitFor(() => t.gw.registry.size === 1);
    const fe = frontend();
    fe.call.write(dialRequest("10.0.0.1:80", 13n));
    const req = await good.packets.next(isType(PacketType.DIAL_REQ));
    good.call.write(dialResponse(req.random, 14n));
    expect((await fe.packets.next(isType(PacketType.DIAL_RSP))).error).toBe("");
    await endCall(fe.call);
    await endCall(good.call);
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("refuses agents without credentials, with a wrong token, or without agentID", async () => {
    const noAuth = client(t.agent, "none").connect({ agentid: "a" });
    await expect(responseHeaders(noAuth)).rejects.toMatchObject({ code: status.UNAUTHENTICATED });
    const badToken = client(t.agent, "none").connect({ agentid: "a", authorization: "Bearer nope" });
    await expect(responseHeaders(badToken)).rejects.toMatchObject({ code: status.UNAUTHENTICATED });
    const noId = client(t.agent, "none").connect({ authorization: `Bearer ${AGENT_TOKEN}` });
    await expect(responseHeaders(noId)).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    const twoIds = client(t.agent, "none").connect({
      agentid: ["a", "b"],
      authorization: `Bearer ${AGENT_TOKEN}`,
    });
    await expect(responseHeaders(twoIds)).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    expect(t.gw.registry.size).toBe(0);
    expect(t.logs.join("\n")).not.toContain("nope");
  });

  it("accepts an agent with a client certificate from the cluster CA, and not from another CA", async () => {
    const ok = client(t.agent, "agent").connect({ agentid: "cert-agent" });
    await expect(responseHeaders(ok)).resolves.toBeDefined();
    await waitFor(() => t.gw.registry.size === 1);
    await endCall(ok);
    // The handshake succeeds (a token could still follow), but the certificate proves nothing.
    const other = client(t.agent, "other").connect({ agentid: "cert-agent" });
    await expect(responseHeaders(other)).rejects.toMatchObject({ code: status.UNAUTHENTICATED });
    await waitFor(() => t.gw.registry.size === 0);
  });

  it("refuses frontends without a client certificate from the server CA", async () => {
    const call = client(t.frontend, "none").proxy();
    const packets = new PacketQueue(call);
    call.write(dialRequest("10.0.0.1:80", 1n));
    await expect(
      new Promise((_resolve, reject) => {
        call.on("error", reject);
      }),
    ).rejects.toMatchObject({ code: status.UNAVAILABLE });
    expect(packets.pending).toHaveLength(0);
  });
});
