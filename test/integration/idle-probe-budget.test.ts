/**
 * Idle agents cost the instance a bounded number of liveness PINGs a second, however many there
 * are (issue 26: idle CPU at 10,000 agents within 10 ms a second, and a PING with its answer costs
 * the server about 200 µs). With more idle agents than the budget covers at the probe interval,
 * each is asked less often instead. What an operator would see on the wire: the PINGs the agents
 * receive. The interval is scaled down (200 ms) so that a hundred agents ask for far more than
 * the budget; with the default 5 s the same happens past 150 agents.
 */
import { type ClientHttp2Session, connect as h2Connect } from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/agent.js";
import { AGENT_TOKEN, startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";

const AGENTS = 100;
const PROBE_INTERVAL_MS = 200;
/** The documented budget (docs/CONFIGURATION.md, --agent-probe-interval): PINGs a second. */
const PINGS_PER_SECOND = 30;
/**
 * Probes whose turns came go out together once per batch (idleProbeBatchMs: a fifth of the
 * interval, here 40 ms), so a window may hold the turns of the batch before it opened.
 */
const BATCH_MS = PROBE_INTERVAL_MS / 5;
/** Long enough that the PINGs already in flight when it starts are a small part of the count. */
const WINDOW_MS = 2_000;

let t: TestGateway;
let baseline: Map<string, number>;
const sessions: ClientHttp2Session[] = [];
let pings = 0;
/** PINGs each agent has received, by its index. */
const pingsOf: number[] = [];

/** One upstream-style agent: its own TLS connection, AgentService.Connect, held open. */
async function agent(i: number): Promise<void> {
  const session = h2Connect(`https://127.0.0.1:${t.gw.addresses.agent.port}`, {
    ca: t.pki.ca.certPem,
    servername: "localhost",
  });
  sessions.push(session);
  session.on("error", () => {});
  pingsOf[i] = 0;
  session.on("ping", () => {
    pings++;
    pingsOf[i]!++;
  });
  const stream = session.request(
    {
      ":method": "POST",
      ":path": "/AgentService/Connect",
      "content-type": "application/grpc",
      te: "trailers",
      agentid: `idle-${i}`,
      authorization: `Bearer ${AGENT_TOKEN}`,
    },
    { endStream: false },
  );
  stream.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    stream.once("response", (h) => (h.serverid ? resolve() : reject(new Error(JSON.stringify(h)))));
    stream.once("close", () => reject(new Error("agent stream closed")));
  });
}

beforeAll(async () => {
  baseline = activeResources();
  t = await startTestGateway([`--agent-probe-interval=${PROBE_INTERVAL_MS}ms`, "--agent-liveness-timeout=0"]);
});

afterAll(async () => {
  for (const s of sessions) s.destroy();
  await t.gw.close();
  await expectNoLeakedResources(baseline);
});

describe("idle agents", () => {
  it("are pinged within the instance's budget a second, not once per interval each", async () => {
    for (let i = 0; i < AGENTS; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, j) => agent(i + j)));
    }
    await waitFor(() => t.gw.registry.size === AGENTS, 10_000, "every agent registered");
    // A new session is PINGed once by the HTTP/2 peer watch (it has just written its SETTINGS);
    // once every agent has had a periodic probe too, only the pacer's turns are left.
    await waitFor(() => pingsOf.every((n) => n >= 2), 20_000, "every agent pinged twice");
    const from = pings;
    const started = performance.now();
    await waitFor(() => performance.now() - started >= WINDOW_MS, WINDOW_MS * 2, "the window");
    const seconds = (performance.now() - started) / 1000;
    // Asked once per interval each, they would get AGENTS / 0.2 s = 500 a second.
    expect(pings - from).toBeLessThanOrEqual(Math.ceil(PINGS_PER_SECOND * (seconds + BATCH_MS / 1000)) + 2);
    // And still asked: the budget is spent, not skipped.
    expect(pings - from).toBeGreaterThan(0);
    for (const s of sessions) expect(s.closed).toBe(false);
  });
});
