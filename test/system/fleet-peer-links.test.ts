/**
 * The peer links of a real fleet (three `kgw server` processes and a fourth started for one case,
 * one DynamoDB stand-in): a hopped dial waits the fleet's --backend-dial-timeout; an instance
 * restarted in place (same id, host and port, new process) is a new peer, used as soon as its
 * agent is back; an agent that moved is reached from every instance before its new row is
 * written; links of instances whose lease is gone are pruned; and while the registry is down, an
 * agent that re-homed is found from every instance by asking the peers.
 *
 * Tenant acme's agent runs in this process and reaches the fleet through a TCP front over the
 * instances each case chooses; its socket factory sends every dial to acme's backend, except
 * dials to HANG's port, which it leaves connecting forever (a backend that never answers).
 */
import { connect as netConnect, Socket } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { DynamoRegistry } from "../../lib/registry/dynamo/dynamo-registry.js";
import { startTestAgent } from "../helpers/agent.js";
import { closedPort } from "../helpers/backends.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import {
  type CreatedFleetTenant,
  createTableTenant,
  dialWhoami,
  type FleetInstance,
  makeFleet,
  startTcpFront,
  startTenantBackend,
  type TcpFront,
  type TenantBackend,
  tempDir,
  waitUntil,
} from "../helpers/fleet.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { overrideProcessEnv } from "../helpers/process-env.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

/** The fleet's --backend-dial-timeout here: longer than the 12 s a hop used to wait regardless. */
const BACKEND_DIAL_TIMEOUT_MS = 15_000;

let pki: TestPki;
let dynamo: LocalDynamo;
let work: ReturnType<typeof tempDir>;
let fleet: FleetInstance[];
let tenant: CreatedFleetTenant;
let backend: TenantBackend;
/** A port the agent's dials never finish connecting to. */
let hangPort: number;
const hanging = new Set<Socket>();
let agent: { agent: RunningAgent; front: TcpFront } | null = null;
let baseline: Map<string, number>;
let restoreEnv: (() => void) | undefined;

/** A socket that never connects (nor fails) until destroyed: the agent's dial waits on it. */
function neverConnecting(): Socket {
  const s = new Socket();
  hanging.add(s);
  s.once("close", () => hanging.delete(s));
  return s;
}

/** acme's agent, through a sticky front over the instances in `order` (the first live one). */
async function startAgentOn(order: number[]): Promise<RunningAgent> {
  await stopAgent();
  const front = await startTcpFront(
    () =>
      order
        .map((i) => fleet[i]!)
        .filter((f) => f.running)
        .map((f) => f.ports.agent),
    "sticky",
  );
  const { agent: a } = await startTestAgent(
    pki,
    front.port,
    [`--agent-token=${tenant.agentToken}`, "--agent-id=acme-agent", "--dial-timeout=60s"],
    {
      connectSocket: ({ port }) =>
        port === hangPort ? neverConnecting() : netConnect({ host: "127.0.0.1", port: backend.port }),
    },
  );
  agent = { agent: a, front };
  return a;
}

async function stopAgent(): Promise<void> {
  if (!agent) return;
  const { agent: a, front } = agent;
  agent = null;
  await a.stop();
  await front.close();
  for (const s of hanging) s.destroy();
}

/** Instances (by index) where acme's agent answers, from their admin /readyz?tenant=. */
async function agentInstances(): Promise<number[]> {
  const out: number[] = [];
  for (const [i, f] of fleet.entries()) {
    if (f.running && (await f.agentsOf("acme")).includes(": ready:")) out.push(i);
  }
  return out;
}

/** A dial of acme entering at instance `i`: its backend's answer. */
const dialAt = (i: number) =>
  dialWhoami(pki, fleet[i]!.ports.agent, tenant.callerToken, `127.0.0.1:${backend.port}`);

/** Dials at instance `i` until one reaches acme's backend; returns ms from `since` and the failures. */
async function untilDialSucceeds(i: number, since: number, timeoutMs: number) {
  const failures: string[] = [];
  while (Date.now() - since < timeoutMs) {
    try {
      if ((await dialAt(i)) === "acme") return { ms: Date.now() - since, failures };
      failures.push("wrong backend");
    } catch (err) {
      failures.push((err as Error).message);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no dial at ${fleet[i]!.id} within ${timeoutMs}ms: ${failures.slice(-3).join("; ")}`);
}

/** A series of instance `i`'s /metrics (summed over labels matching `labels`), 0 when absent. */
async function metric(i: number, name: string, labels = ""): Promise<number> {
  let sum = 0;
  for (const line of (await fleet[i]!.metrics()).split("\n")) {
    if (!line.startsWith(`${name} `) && !line.startsWith(`${name}{`)) continue;
    if (labels && !line.includes(labels)) continue;
    sum += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return sum;
}

beforeAll(async () => {
  pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = resources();
  work = tempDir("kgw-fleet-links-");
  dynamo = await startLocalDynamo();
  restoreEnv = overrideProcessEnv(dynamo.env);
  tenant = await createTableTenant(pki, dynamo.tableName, "acme", work.dir);
  backend = await startTenantBackend("acme");
  hangPort = await closedPort();
  fleet = await makeFleet(
    {
      pki,
      peerFiles: peer.files,
      table: dynamo.tableName,
      dynamoEnv: dynamo.env,
      flags: [`--backend-dial-timeout=${BACKEND_DIAL_TIMEOUT_MS}ms`],
    },
    4,
    work.dir,
  );
  // The fourth is started by the pruning case only.
  await Promise.all(fleet.slice(0, 3).map((f) => f.start()));
});

afterEach((ctx) => {
  if (ctx.task.result?.state !== "fail") return;
  for (const f of fleet ?? []) {
    const lines = f.log().trim().split("\n");
    const notable = lines.filter((l) => !l.includes('"level":"info"') && !l.includes('"level":"debug"'));
    console.log(`---- ${f.id} (${f.logFile}), warnings and errors:\n${notable.slice(-60).join("\n")}`);
  }
});

afterAll(async () => {
  await stopAgent();
  await Promise.all((fleet ?? []).map((f) => (f.running ? f.terminate() : undefined)));
  await backend?.close();
  await dynamo?.close();
  restoreEnv?.();
  await expectNoLeakedResources(baseline);
  work?.remove();
}, 30_000);

describe("peer links in a fleet of three", () => {
  it("a dial hopped to the owner waits the fleet's --backend-dial-timeout, and the owner answers it", async () => {
    await startAgentOn([0]);
    await waitUntil(async () => (await agentInstances()).join() === "0", 10_000, "acme's agent on fleet-1");
    expect(await dialAt(2)).toBe("acme");
    const ownerTimeouts = () =>
      metric(0, "konnectivity_network_proxy_server_dial_failure_count", 'reason="backend_dial_timeout"');
    const before = await ownerTimeouts();
    const started = Date.now();
    // Entering at fleet-3: a peer hop to fleet-1, whose agent never gets an answer.
    const res = await connectOnGatewayPort(
      pki,
      fleet[2]!.ports.agent,
      { token: tenant.callerToken },
      `127.0.0.1:${hangPort}`,
    );
    const elapsed = Date.now() - started;
    res.socket.destroy();
    console.log(`fleet links: hopped dial to a silent backend answered ${res.status} after ${elapsed} ms`);
    expect(res.status).toBe(504);
    // The owner's own timeout (the flag), not the forwarding instance's fixed 12 s before it.
    expect(elapsed).toBeGreaterThanOrEqual(BACKEND_DIAL_TIMEOUT_MS - 500);
    expect(await ownerTimeouts()).toBe(before + 1);
  }, 40_000);

  it("an instance restarted in place is dialed again as soon as its agent is back", async () => {
    await startAgentOn([0]);
    await waitUntil(async () => (await agentInstances()).join() === "0", 10_000, "acme's agent on fleet-1");
    // fleet-2 and fleet-3 have a link to fleet-1 (one dial each).
    for (const i of [1, 2]) expect(await dialAt(i)).toBe("acme");
    const failuresBefore = await metric(2, "kgw_server_peer_link_failures_total");
    const killedAt = Date.now();
    await fleet[0]!.kill9();
    // The link's reset is a failure fleet-3 counts (and logs, with fleet-1's id).
    await waitUntil(
      async () => (await metric(2, "kgw_server_peer_link_failures_total")) > failuresBefore,
      5_000,
      "fleet-3 counted its link to fleet-1 failing",
    );
    await fleet[0]!.start();
    await waitUntil(async () => (await agentInstances()).join() === "0", 10_000, "acme's agent back");
    const back = Date.now();
    const hop2 = await untilDialSucceeds(1, back, 10_000);
    const hop3 = await untilDialSucceeds(2, back, 10_000);
    console.log(
      `fleet links: in-place restart: agent back ${back - killedAt} ms after the kill; first dial through fleet-2 ${hop2.ms} ms after that (${hop2.failures.length} failed), fleet-3 ${hop3.ms} ms (${hop3.failures.length} failed)`,
    );
    // Within a few lease re-reads (300 ms here), not the predecessor's failure backoff.
    expect(hop2.ms).toBeLessThan(1500);
    expect(hop3.ms).toBeLessThan(1500);
  }, 40_000);

  it("reaches an agent that moved from every instance before its new row is written", async () => {
    await startAgentOn([0]);
    await waitUntil(async () => (await agentInstances()).join() === "0", 10_000, "acme's agent on fleet-1");
    // fleet-3 knows fleet-1 as acme's owner (its row is written in the background).
    await untilDialSucceeds(2, Date.now(), 5_000);
    // fleet-2's claim of acme's row waits at the table's front; everything else goes through.
    const claim = dynamo.hold((op, body) => op === "PutItem" && body.includes('"fleet-2#acme-agent"'));
    onTestFinished(() => claim.release());
    await startAgentOn([1]);
    await waitUntil(async () => (await agentInstances()).join() === "1", 10_000, "acme's agent on fleet-2");
    await waitUntil(async () => claim.count() > 0, 5_000, "fleet-2's claim of acme's row held");
    const registry = new DynamoRegistry({ tableName: dynamo.tableName, client: dynamo.client });
    // fleet-1's row deleted: the table names no owner of acme.
    await waitUntil(
      async () => (await registry.ownersOf("acme")).items.length === 0,
      5_000,
      "no row of acme",
    );
    const found = (i: number) => metric(i, "kgw_server_peer_probes_total", 'answer="has_agents"');
    const before = [await found(0), await found(2)];
    // At fleet-3, which knew fleet-1 as the owner: "not here", the registry names nobody, and
    // fleet-2 says it holds acme's agent.
    expect(await dialAt(2)).toBe("acme");
    // At fleet-1, which never looked acme up (its agent was local): the registry names nobody.
    expect(await dialAt(0)).toBe("acme");
    expect([await found(0), await found(2)]).toEqual([before[0]! + 1, before[1]! + 1]);
    expect(claim.count()).toBeGreaterThan(0);
    expect((await registry.ownersOf("acme")).items).toEqual([]);
    claim.release();
    await waitUntil(
      async () => (await registry.ownersOf("acme")).items.map((r) => r.instanceId).join() === "fleet-2",
      5_000,
      "fleet-2's row of acme written",
    );
  }, 40_000);

  it("prunes the link of an instance whose lease is gone", async () => {
    const extra = fleet[3]!;
    await extra.start();
    onTestFinished(async () => {
      if (extra.running) await extra.terminate();
    });
    await startAgentOn([3]);
    await waitUntil(async () => (await agentInstances()).join() === "3", 10_000, "acme's agent on fleet-4");
    // fleet-3 routes to the instances of its last read of the leases (every 300 ms here): a dial
    // it takes before that read has seen fleet-4's lease finds no live owner (DESIGN, Routing).
    await waitUntil(
      async () => (await metric(2, "kgw_fleet_live_instances")) === 4,
      5_000,
      "fleet-3 read fleet-4's lease",
    );
    expect(await dialAt(2)).toBe("acme");
    const withExtra = await metric(2, "kgw_server_peer_links");
    expect(withExtra).toBeGreaterThanOrEqual(1);
    await stopAgent();
    expect(await extra.terminate()).toEqual({ code: 0, signal: null });
    // Its lease is released at exit: fleet-3's next read of the leases drops the link.
    await waitUntil(
      async () => (await metric(2, "kgw_server_peer_links")) === withExtra - 1,
      5_000,
      "fleet-3 pruned its link to fleet-4",
    );
  }, 40_000);

  // Each case re-homes the agent to another instance and dials at the third, which has asked
  // its peers about acme before in neither.
  it.each([
    { outage: "refuses connections", home: 1, entry: 2 },
    { outage: "hangs", home: 2, entry: 1 },
  ] as const)(
    "while the registry $outage, finds an agent that re-homed from every instance",
    async ({ outage, home, entry }) => {
      await startAgentOn([0, home]);
      await waitUntil(async () => (await agentInstances()).join() === "0", 10_000, "acme's agent on fleet-1");
      // Every instance has routed acme once: each knows fleet-1 as its owner (its row is
      // written in the background, so the first dial may come before it).
      for (const i of [1, 2]) await untilDialSucceeds(i, Date.now(), 5_000);
      await (outage === "hangs" ? dynamo.blackhole() : dynamo.stop());
      onTestFinished(async () => {
        await dynamo.start();
        if (!fleet[0]!.running) await fleet[0]!.start();
      });
      // The owner dies during the outage; its agent moves, and its new row cannot be written.
      await fleet[0]!.kill9();
      await waitUntil(
        async () => (await agentInstances()).join() === String(home),
        10_000,
        `acme's agent on ${fleet[home]!.id}`,
      );
      const results: { ms: number; error: string | null }[] = [];
      for (let n = 0; n < 9; n++) {
        const started = Date.now();
        let error: string | null = null;
        try {
          const got = await dialAt(entry);
          if (got !== "acme") error = `reached ${got}`;
        } catch (err) {
          error = (err as Error).message;
        }
        results.push({ ms: Date.now() - started, error });
      }
      const failed = results.filter((r) => r.error !== null);
      console.log(
        `fleet links: registry ${outage}, owner killed, agent re-homed: ${results.length - failed.length} of ${results.length} dials at ${fleet[entry]!.id} succeeded; ms each: ${results.map((r) => r.ms).join(",")}`,
      );
      expect(failed.map((r) => r.error)).toEqual([]);
      // A hung registry holds up no dial by more than the half second after which the peers
      // are asked beside a routing read (it held each up 3 s, the read's timeout).
      expect(Math.max(...results.map((r) => r.ms))).toBeLessThan(2000);
      const probes = await metric(entry, "kgw_server_peer_probes_total", 'answer="has_agents"');
      expect(probes).toBeGreaterThanOrEqual(1);
    },
    60_000,
  );
});
