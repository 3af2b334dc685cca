/**
 * A local fleet of three real `kgw server` processes sharing one DynamoDB table (dynalite, started
 * here), tenants acme and globex each with our agent and a backend of its own. Dials entering at
 * any instance must reach their own tenant's backend (a peer hop when the agent is elsewhere);
 * instances are killed, restarted and rolled, and DynamoDB goes away for a while, under dials.
 *
 * The agents run in this process and reach the fleet through a TCP front that plays the load
 * balancer; each agent's socket factory sends every backend dial to its own tenant's backend,
 * which answers /whoami with the tenant's id, so a dial routed to the wrong tenant's agent shows.
 * The registry's races (two instances claiming one agent, a late delete from an old owner) are
 * test/unit/registry*.test.ts's.
 */
import { connect as netConnect } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { startTestAgent } from "../helpers/agent.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import {
  type CreatedFleetTenant,
  createTableTenant,
  dialWhoami,
  downloadSha,
  expectedSha,
  type FleetInstance,
  makeFleet,
  openTunnel,
  startTcpFront,
  startTenantBackend,
  type TcpFront,
  type TenantBackend,
  tempDir,
  waitUntil,
} from "../helpers/fleet.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { overrideProcessEnv } from "../helpers/process-env.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

const TENANTS = ["acme", "globex"] as const;
/**
 * How long DynamoDB is down in the outage case: the 30 s. Longer than every lease
 * (--lease-duration=2s here) and than the sweeper's grace (30 s), so that when it returns every
 * lease in the table looks long dead: the sweepers must not take that for dead instances.
 */
const OUTAGE_MS = 30_000;
type TenantId = (typeof TENANTS)[number];
/** How long the rolling restart's front keeps an instance out before SIGTERM (see the test). */
const DEREGISTRATION_MS = 300;

let pki: TestPki;
let dynamo: LocalDynamo;
let work: ReturnType<typeof tempDir>;
let fleet: FleetInstance[];
const tenants = {} as Record<TenantId, CreatedFleetTenant>;
const backends = {} as Record<TenantId, TenantBackend>;
const agents: { tenant: TenantId; agent: RunningAgent; front: TcpFront }[] = [];
let baseline: Map<string, number>;
let restoreEnv: (() => void) | undefined;

const agentPorts = (order: number[]) => () =>
  order
    .map((i) => fleet[i]!)
    .filter((f) => f.running)
    .map((f) => f.ports.agent);

/**
 * Our agent for `tenant`, through a front over the instances in `order`: "sticky" keeps it on
 * the first live one (one stream: the agent's other attempts land there again as duplicates).
 */
async function startAgentFor(
  tenant: TenantId,
  order: number[],
  mode: "round-robin" | "sticky",
  agentId = `${tenant}-agent`,
): Promise<RunningAgent> {
  const front = await startTcpFront(agentPorts(order), mode);
  const backendPort = backends[tenant].port;
  const { agent } = await startTestAgent(
    pki,
    front.port,
    [`--agent-token=${tenants[tenant].agentToken}`, `--agent-id=${agentId}`],
    { connectSocket: () => netConnect({ host: "127.0.0.1", port: backendPort }) },
  );
  agents.push({ tenant, agent, front });
  return agent;
}

async function stopAgent(agent: RunningAgent): Promise<void> {
  const i = agents.findIndex((a) => a.agent === agent);
  const [entry] = agents.splice(i, 1);
  await entry!.agent.stop();
  await entry!.front.close();
}

/** A dial of `tenant` entering at instance `i`: its backend's answer. */
function dialAt(i: number, tenant: TenantId): Promise<string> {
  return dialWhoami(
    pki,
    fleet[i]!.ports.agent,
    tenants[tenant].callerToken,
    `127.0.0.1:${backends[tenant].port}`,
  );
}

/** Rejects with `what` when `p` does not settle within `ms`. */
function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms}ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Dials `tenant` entering at instance `i` until one reaches its backend; ms from `since`. */
async function untilDialSucceeds(
  i: number,
  tenant: TenantId,
  since: number,
  timeoutMs: number,
): Promise<number> {
  let last = "";
  while (Date.now() - since < timeoutMs) {
    try {
      if ((await within(dialAt(i, tenant), 2000, "dial")) === tenant) return Date.now() - since;
      last = "wrong backend";
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no successful dial of ${tenant} at ${fleet[i]!.id} within ${timeoutMs}ms (last: ${last})`);
}

interface DialRecord {
  tenant: TenantId;
  port: number;
  start: number;
  end: number;
  error: string | null;
}

/**
 * `workers` loops dialing back to back, alternating tenants, each dial entering at the port
 * `entry()` picks, until stop(); every dial's outcome is recorded.
 */
function dialContinuously(entry: () => number, workers = 2) {
  const records: DialRecord[] = [];
  let stopped = false;
  const loop = async (w: number) => {
    for (let k = w; !stopped; k++) {
      const tenant = TENANTS[k % TENANTS.length]!;
      const port = entry();
      const start = Date.now();
      let error: string | null = null;
      try {
        const got = await within(
          dialWhoami(pki, port, tenants[tenant].callerToken, `127.0.0.1:${backends[tenant].port}`),
          5000,
          "dial",
        );
        if (got !== tenant) error = `reached ${got}'s backend`;
      } catch (err) {
        error = (err as Error).message;
      }
      records.push({ tenant, port, start, end: Date.now(), error });
    }
  };
  const loops = Array.from({ length: workers }, (_, w) => loop(w));
  return {
    records,
    stop: async () => {
      stopped = true;
      await Promise.all(loops);
      return records;
    },
  };
}

/** Instances (by index) where `tenant` has an agent answering, from their admin /readyz?tenant=. */
async function agentInstances(tenant: TenantId): Promise<number[]> {
  const out: number[] = [];
  for (const [i, f] of fleet.entries()) {
    if (f.running && (await f.agentsOf(tenant)).includes(": ready:")) out.push(i);
  }
  return out;
}

beforeAll(async () => {
  pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = resources();
  work = tempDir("kgw-fleet-");
  dynamo = await startLocalDynamo();
  // `kgw tenant --table` in this process reads the SDK's standard configuration, as it would
  // from an operator's shell.
  restoreEnv = overrideProcessEnv(dynamo.env);
  for (const id of TENANTS) {
    tenants[id] = await createTableTenant(pki, dynamo.tableName, id, work.dir);
    backends[id] = await startTenantBackend(id);
  }
  fleet = await makeFleet(
    { pki, peerFiles: peer.files, table: dynamo.tableName, dynamoEnv: dynamo.env },
    3,
    work.dir,
  );
  await Promise.all(fleet.map((f) => f.start()));
});

afterEach((ctx) => {
  if (ctx.task.result?.state !== "fail") return;
  for (const f of fleet ?? []) {
    // What went wrong is in the warnings and errors; the last lines say where it stopped.
    const lines = f.log().trim().split("\n");
    const notable = lines.filter((l) => !l.includes('"level":"info"') && !l.includes('"level":"debug"'));
    console.log(
      `---- ${f.id} (${f.logFile}), warnings and errors:\n${notable.slice(-80).join("\n")}\n---- last lines:\n${lines.slice(-15).join("\n")}`,
    );
  }
});

afterAll(async () => {
  for (const a of [...agents]) await stopAgent(a.agent);
  await Promise.all((fleet ?? []).map((f) => (f.running ? f.terminate() : undefined)));
  for (const b of Object.values(backends)) await b.close();
  await dynamo?.close();
  restoreEnv?.();
  expect(fleet.filter((f) => f.running).map((f) => f.id)).toEqual([]);
  await expectNoLeakedResources(baseline);
  work?.remove();
}, 30_000);

describe("a fleet of three", () => {
  it("routes dials entering at every instance to their own tenant's agent", async () => {
    // acme's agent on instance 0, globex's on 1; instance 2 has none.
    await startAgentFor("acme", [0, 1, 2], "sticky");
    await startAgentFor("globex", [1, 2, 0], "sticky");
    await waitUntil(
      async () => (await agentInstances("acme")).join() === "0",
      10_000,
      "acme's agent on fleet-1",
    );
    await waitUntil(
      async () => (await agentInstances("globex")).join() === "1",
      10_000,
      "globex's agent on fleet-2",
    );
    for (let round = 0; round < 2; round++) {
      for (const i of [0, 1, 2]) {
        for (const tenant of TENANTS) {
          expect(await dialAt(i, tenant), `${tenant} entering at ${fleet[i]!.id}`).toBe(tenant);
        }
      }
    }
  });

  it("carries 256 MiB across a peer hop intact (SHA-256)", async () => {
    const size = 256 * 1024 * 1024;
    const started = Date.now();
    // acme's agent is on fleet-1: entering at fleet-3 crosses one peer link.
    const [got, want] = await Promise.all([
      downloadSha(
        pki,
        fleet[2]!.ports.agent,
        tenants.acme.callerToken,
        `127.0.0.1:${backends.acme.port}`,
        size,
      ),
      expectedSha(size),
    ]);
    const seconds = (Date.now() - started) / 1000;
    console.log(
      `fleet: 256 MiB across a peer hop in ${seconds.toFixed(1)} s (${(256 / seconds).toFixed(0)} MiB/s)`,
    );
    expect(got).toEqual(want);
  }, 90_000);

  it("fails over a tenant's only agent within 5 s of kill -9 of its instance", async () => {
    expect(await agentInstances("acme")).toEqual([0]);
    const killedAt = Date.now();
    await fleet[0]!.kill9();
    try {
      // Entering at fleet-3 (no agents: a peer hop to wherever acme's agent went) and at fleet-2.
      const viaHop = await untilDialSucceeds(2, "acme", killedAt, 10_000);
      const direct = await untilDialSucceeds(1, "acme", killedAt, 10_000);
      console.log(
        `fleet: single agent, kill -9: first successful dial ${viaHop} ms after the kill entering at fleet-3 (peer hop), ${direct} ms at fleet-2`,
      );
      expect(viaHop).toBeLessThan(5000);
      expect(await agentInstances("acme")).toEqual([1]);
    } finally {
      await fleet[0]!.start();
    }
  });

  it("keeps every dial of a tenant whose agent holds two instances through kill -9 of one", async () => {
    // From here on the agents reach the fleet as they would through the NLB: round-robin.
    // serverCount (the fleet's, --agent-redundancy=2) has each hold streams to two instances.
    for (const a of [...agents]) await stopAgent(a.agent);
    const acme = await startAgentFor("acme", [0, 1, 2], "round-robin");
    const globex = await startAgentFor("globex", [0, 1, 2], "round-robin");
    await waitUntil(
      () => acme.state().connectedServers.length === 2 && globex.state().connectedServers.length === 2,
      10_000,
      "each agent on two instances",
    );
    expect(globex.state().targetServerCount).toBe(2);
    const holders = await agentInstances("globex");
    expect(holders).toHaveLength(2);
    const victim = holders[0]!;
    const survivors = [0, 1, 2].filter((i) => i !== victim);
    // Warm: every survivor has routed each tenant once (as in the steady state).
    for (const i of survivors) for (const t of TENANTS) expect(await dialAt(i, t)).toBe(t);

    let n = 0;
    const dials = dialContinuously(() => fleet[survivors[n++ % survivors.length]!]!.ports.agent);
    await waitUntil(() => dials.records.length >= 20, 10_000, "dials before the kill");
    const killedAt = Date.now();
    await fleet[victim]!.kill9();
    onTestFinished(() => fleet[victim]!.start());
    // Past the lease (2 s): the registry no longer names the dead instance either.
    await waitUntil(
      () => dials.records.filter((r) => r.start > killedAt + 2500).length >= 20,
      20_000,
      "dials after",
    );
    const records = await dials.stop();
    const failed = records.filter((r) => r.error !== null);
    const afterKill = failed.filter((r) => r.start >= killedAt);
    const worst = Math.max(...records.filter((r) => r.start >= killedAt).map((r) => r.end - r.start));
    console.log(
      `fleet: two streams per agent, kill -9 of ${fleet[victim]!.id}: ${records.length} dials, ${failed.length} failed (${afterKill.length} started after the kill), slowest dial after the kill ${worst} ms`,
    );
    expect(afterKill.map((r) => `${r.tenant}@${r.port}: ${r.error}`)).toEqual([]);
    // Only dials in flight at the kill may fail: at most one per dialing loop.
    expect(failed.length).toBeLessThanOrEqual(2);
  }, 60_000);

  it("rolls all three instances one at a time under continuous dialing with no failed dial", async () => {
    const held = () => agents.every((a) => a.agent.state().connectedServers.length === 2);
    await waitUntil(held, 10_000, "each agent on two instances");
    // The callers' load balancer: every registered instance, those refusing connections skipped.
    // As ECS does in a rolling deployment (docs/DEPLOY.md), an instance leaves it before it gets
    // SIGTERM: closing a listener resets the connections still in its accept queue, which no
    // server can answer, so the balancer must stop sending first.
    const deregistered = new Set<string>();
    const front = await startTcpFront(() =>
      fleet.filter((f) => !deregistered.has(f.id)).map((f) => f.ports.agent),
    );
    const dials = dialContinuously(() => front.port);
    try {
      await waitUntil(() => dials.records.length >= 20, 10_000, "dials before the roll");
      const rollStarted = Date.now();
      for (const f of fleet) {
        deregistered.add(f.id);
        // The deregistration delay: connections the front already handed over reach the
        // instance (ECS waits 20 s; a loopback hand-over takes well under this).
        await new Promise((r) => setTimeout(r, DEREGISTRATION_MS));
        const t0 = Date.now();
        const exit = await within(f.terminate(), 15_000, `${f.id} exit after SIGTERM`);
        expect(exit, `${f.id} exit`).toEqual({ code: 0, signal: null });
        const t1 = Date.now();
        await f.start();
        deregistered.delete(f.id);
        await waitUntil(held, 15_000, `agents on two instances again after ${f.id}`);
        console.log(
          `fleet: rolled ${f.id}: exit ${t1 - t0} ms after SIGTERM, ready ${Date.now() - t1} ms after start`,
        );
      }
      await waitUntil(
        () => dials.records.filter((r) => r.start > Date.now() - 1000).length >= 10,
        10_000,
        "dials after",
      );
      const records = await dials.stop();
      const during = records.filter((r) => r.start >= rollStarted);
      const failed = records.filter((r) => r.error !== null);
      console.log(
        `fleet: rolling restart in ${((Date.now() - rollStarted) / 1000).toFixed(1)} s: ${during.length} dials during the roll, ${failed.length} failed`,
      );
      expect(failed.map((r) => `${r.tenant}@${r.start - rollStarted}ms: ${r.error}`)).toEqual([]);
    } finally {
      await dials.stop();
      await front.close();
    }
  }, 90_000);

  it("keeps live tunnels and cached routes while DynamoDB is down, and is ready again after", async () => {
    const outageMs = OUTAGE_MS;
    // For each tenant, an instance without its agents: its dials there take a peer hop, on the
    // owners it has cached.
    const hop = {} as Record<TenantId, number>;
    for (const t of TENANTS) {
      const holders = await agentInstances(t);
      expect(holders).toHaveLength(2);
      hop[t] = [0, 1, 2].find((i) => !holders.includes(i))!;
    }
    // Cache every route: one dial of each tenant at each instance.
    for (const i of [0, 1, 2]) for (const t of TENANTS) expect(await dialAt(i, t)).toBe(t);
    const tunnels = await Promise.all(
      TENANTS.map(async (t) => ({
        tenant: t,
        tunnel: await openTunnel(
          pki,
          fleet[hop[t]]!.ports.agent,
          tenants[t].callerToken,
          `127.0.0.1:${backends[t].port}`,
        ),
      })),
    );
    try {
      for (const { tenant, tunnel } of tunnels) expect(await tunnel.ask()).toBe(tenant);
      await dynamo.stop();
      const stoppedAt = Date.now();
      const failures: string[] = [];
      let rounds = 0;
      while (Date.now() - stoppedAt < outageMs) {
        rounds++;
        const at = Date.now() - stoppedAt;
        await Promise.all([
          ...tunnels.map(({ tenant, tunnel }) =>
            tunnel.ask().then(
              (got) => void (got !== tenant && failures.push(`${at}ms tunnel ${tenant}: ${got}`)),
              (err: Error) => void failures.push(`${at}ms tunnel ${tenant}: ${err.message}`),
            ),
          ),
          ...[0, 1, 2].flatMap((i) =>
            TENANTS.map((t) =>
              within(dialAt(i, t), 5000, "dial").then(
                (got) => void (got !== t && failures.push(`${at}ms dial ${t}@${fleet[i]!.id}: ${got}`)),
                (err: Error) => void failures.push(`${at}ms dial ${t}@${fleet[i]!.id}: ${err.message}`),
              ),
            ),
          ),
        ]);
        await new Promise((r) => setTimeout(r, 250));
      }
      const during = await Promise.all(fleet.map((f) => f.readyz()));
      await dynamo.start();
      const restartedAt = Date.now();
      await waitUntil(
        async () => (await Promise.all(fleet.map((f) => f.readyz()))).every((s) => s === 200),
        15_000,
        "every instance ready again",
      );
      console.log(
        `fleet: DynamoDB down ${outageMs} ms: ${rounds} rounds of ${tunnels.length} tunnel requests and 6 dials, ${failures.length} failed; /readyz during the outage ${during.join(",")}, all ready ${Date.now() - restartedAt} ms after it returned`,
      );
      expect(failures).toEqual([]);
      for (const { tenant, tunnel } of tunnels) expect(await tunnel.ask()).toBe(tenant);
      for (const i of [0, 1, 2]) for (const t of TENANTS) expect(await dialAt(i, t)).toBe(t);
    } finally {
      for (const { tunnel } of tunnels) tunnel.close();
      await dynamo.start();
    }
  }, 90_000);
});
