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
