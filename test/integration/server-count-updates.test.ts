/**
 * serverCount updates (lib/tunnel/server-count-updates.ts): an agent that joined when the fleet
 * told it one server holds a second stream once its server announces two, over either transport.
 * Fleet membership is not needed to show it: the announcement is what a fleet instance sends
 * when its lease reads change the count (test/unit/fleet-server-count.test.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SERVER_COUNT_HEADER, SERVER_COUNT_V1 } from "../../lib/tunnel/server-count-updates.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { startTcpFront } from "../helpers/fleet.js";
import { AGENT_TOKEN, startTestGateway } from "../helpers/gateway.js";
import { RawClient, responseHeaders, tlsCredentials } from "../helpers/grpc-clients.js";
import { PacketQueue } from "../helpers/packet-queue.js";
import { getTestPki } from "../helpers/pki.js";

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
  await getTestPki();
  baseline = resources();
});
afterAll(() => noLeakedHandles());

describe("an agent told of a larger fleet after it connected", () => {
  it.each([
    ["kgw-tunnel/1", "auto"],
    ["gRPC", "grpc"],
  ])("over %s: connects to a second server", async (_name, transport) => {
    const a = await startTestGateway(["--server-id=gw-a"]);
    const b = await startTestGateway(["--server-id=gw-b"]);
    let targets = [a.gw.addresses.agent.port];
    const front = await startTcpFront(() => targets);
    const { agent } = await startTestAgent(a.pki, front.port, [`--server-transport=${transport}`]);
    await waitFor(() => agent.state().connectedServers.join() === "gw-a", 10_000, "agent on A");
    expect(agent.state().targetServerCount).toBe(1);

    // B joins the fleet behind the load balancer, and A, which counted one, now counts two.
    targets = [a.gw.addresses.agent.port, b.gw.addresses.agent.port];
    const [session] = [...a.gw.registry.all()];
    session!.announceServerCount(2);
    await waitFor(
      () => agent.state().connectedServers.sort().join() === "gw-a,gw-b",
      10_000,
      "agent on A and B",
    );
    expect(agent.state().targetServerCount).toBe(2);

    await agent.stop();
    await front.close();
    await a.gw.close();
    await b.gw.close();
  });
});

describe("KGW_SERVER_COUNT on the wire", () => {
  it("is acknowledged and sent only to an agent that asks", async () => {
    const t = await startTestGateway();
    const ours = new RawClient(t.agent, tlsCredentials(t.pki, "none"));
    const upstream = new RawClient(t.agent, tlsCredentials(t.pki, "none"));
    const auth = `Bearer ${AGENT_TOKEN}`;
    const oursCall = ours.connect({
      agentid: "ours",
      authorization: auth,
      [SERVER_COUNT_HEADER]: SERVER_COUNT_V1,
    });
    const upstreamCall = upstream.connect({ agentid: "upstream", authorization: auth });
    const oursPackets = new PacketQueue(oursCall);
    const upstreamPackets = new PacketQueue(upstreamCall);
    const [oursHeaders, upstreamHeaders] = await Promise.all([
      responseHeaders(oursCall),
      responseHeaders(upstreamCall),
    ]);
    expect(oursHeaders.get(SERVER_COUNT_HEADER)).toEqual([SERVER_COUNT_V1]);
    expect(upstreamHeaders.get(SERVER_COUNT_HEADER)).toEqual([]);
    await waitFor(() => t.gw.registry.size === 2, 5000, "both agents registered");

    for (const session of t.gw.registry.all()) {
      session.announceServerCount(1); // what they were told: nothing to send
      session.announceServerCount(3);
    }
    await t.gw.close();
    await waitFor(() => oursPackets.ended && upstreamPackets.ended, 5000, "both streams ended");
    expect(oursPackets.pending.map((p) => (p.type === "unknown" ? -1 : p.type))).toEqual([101]);
    expect(oursPackets.pending[0]).toMatchObject({ count: 3n });
    expect(upstreamPackets.pending).toEqual([]);
    ours.close();
    upstream.close();
  });
});
