/**
 * The fleet-wide status, as an operator reads it with `kgw status`: a local fleet of three real
 * `kgw server` processes on one DynamoDB table (dynalite), three tenants, each with a real
 * `kgw agent` process behind a sticky TCP front (the load balancer) that puts it on a known
 * instance. One instance is killed with SIGKILL; `kgw status --json`, run as a child process
 * against each surviving instance's admin port, must show every tenant's agents where they really
 * are (once the killed instance's agent has re-homed) and the dead instance as not answering,
 * never hidden.
 */
import { get as httpsGet } from "node:https";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { FleetStatus, TenantStatus } from "../../lib/server/status/status-model.js";
import { KGW_VERSION } from "../../lib/tenancy/manifest/images.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import {
  type CreatedFleetTenant,
  createTableTenant,
  type FleetInstance,
  makeFleet,
  spawnFleetAgent,
  startTcpFront,
  type TcpFront,
  tempDir,
  waitUntil,
} from "../helpers/fleet.js";
import { type KgwProcess, spawnKgw } from "../helpers/kgw-process.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { overrideProcessEnv } from "../helpers/process-env.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

/** Each tenant's agent goes to the first live instance of its order (the sticky front). */
const ORDER = { acme: [0, 1, 2], globex: [1, 2, 0], initech: [2, 0, 1] } as const;
type TenantId = keyof typeof ORDER;
const TENANTS = Object.keys(ORDER) as TenantId[];
/** The instance killed: globex's, whose agent must then show on fleet-3. */
const KILLED = 1;

let pki: TestPki;
let dynamo: LocalDynamo;
let work: ReturnType<typeof tempDir>;
let fleet: FleetInstance[];
let baseline: Map<string, number>;
const tenants = {} as Record<TenantId, CreatedFleetTenant>;
const agents: { tenant: TenantId; process: KgwProcess; front: TcpFront }[] = [];
let restoreEnv: (() => void) | undefined;

/** Where the test put each tenant's agent: the first running instance of its order. */
function expectedHome(tenant: TenantId): string {
  const i = ORDER[tenant].find((k) => fleet[k]!.running);
  return fleet[i!]!.id;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `kgw status <args>` as a child process, to its end. */
async function kgwStatus(args: string[]): Promise<Run> {
  const p = spawnKgw(["status", ...args]);
  let stdout = "";
  let stderr = "";
  p.child.stdout!.on("data", (d: Buffer) => {
    stdout += d.toString();
  });
  p.child.stderr!.on("data", (d: Buffer) => {
    stderr += d.toString();
  });
  // "close", not "exit": the pipes are read to their end first.
  const code = await new Promise<number | null>((resolve) => p.child.once("close", (c) => resolve(c)));
  return { code, stdout, stderr };
}

const adminUrl = (i: number) => `--admin-url=http://127.0.0.1:${fleet[i]!.ports.admin}`;

async function fleetStatusAt(i: number): Promise<FleetStatus> {
  const r = await kgwStatus([adminUrl(i), "--json"]);
  if (r.code !== 0) throw new Error(`kgw status exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as FleetStatus;
}

/** Every agent the answer lists, as "tenant@instance", sorted; and the instances' summaries. */
async function agentsSeenAt(i: number): Promise<{ seen: string[]; status: FleetStatus }> {
  const status = await fleetStatusAt(i);
  const seen: string[] = [];
  for (const tenant of TENANTS) {
    const r = await kgwStatus([tenant, adminUrl(i), "--json"]);
    if (r.code !== 0) throw new Error(`kgw status ${tenant} exited ${r.code}: ${r.stderr}`);
    const detail = JSON.parse(r.stdout) as TenantStatus;
    for (const a of detail.tenant.agents) seen.push(`${a.agentId}@${a.instance}`);
  }
  return { seen: seen.sort(), status };
}

/** A tenant's own GET /v1/status on instance `i`'s gateway port, with its caller token. */
function selfStatusAt(i: number, tenant: TenantId): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsGet(
      {
        host: "127.0.0.1",
        port: fleet[i]!.ports.agent,
        path: "/v1/status",
        servername: "localhost",
        ca: pki.ca.certPem,
        agent: false,
        headers: { authorization: `Bearer ${tenants[tenant].callerToken}` },
      },
      (res) => {
        let body = "";
        res.on("data", (d: Buffer) => {
          body += d.toString();
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
  });
}

const expectedAgents = () => TENANTS.map((t) => `${t}-agent@${expectedHome(t)}`).sort();

beforeAll(async () => {
  pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = resources();
  work = tempDir("kgw-fleet-status-");
  dynamo = await startLocalDynamo();
  restoreEnv = overrideProcessEnv(dynamo.env);
  for (const id of TENANTS) tenants[id] = await createTableTenant(pki, dynamo.tableName, id, work.dir);
  fleet = await makeFleet(
    { pki, peerFiles: peer.files, table: dynamo.tableName, dynamoEnv: dynamo.env },
    3,
    work.dir,
  );
  await Promise.all(fleet.map((f) => f.start()));
  for (const tenant of TENANTS) {
    const front = await startTcpFront(
      () =>
        ORDER[tenant]
          .map((i) => fleet[i]!)
          .filter((f) => f.running)
          .map((f) => f.ports.agent),
      "sticky",
    );
    const p = spawnFleetAgent(pki, front.port, tenants[tenant].agentToken, `${tenant}-agent`);
    agents.push({ tenant, process: p, front });
  }
}, 60_000);

afterEach((ctx) => {
  if (ctx.task.result?.state !== "fail") return;
  for (const f of fleet ?? [])
    console.log(`---- ${f.id}:\n${f.log().trim().split("\n").slice(-30).join("\n")}`);
  for (const a of agents) console.log(`---- ${a.tenant}-agent:\n${a.process.output.join("").slice(-2000)}`);
});

afterAll(async () => {
  for (const a of agents) {
    a.process.child.kill("SIGTERM");
    await a.process.exited;
    await a.front.close();
  }
  await Promise.all((fleet ?? []).map((f) => (f.running ? f.terminate() : undefined)));
  await dynamo?.close();
  restoreEnv?.();
  await expectNoLeakedResources(baseline);
  work?.remove();
}, 30_000);

describe("kgw status against a fleet of three", () => {
  it("every instance shows every tenant's agent where it is, with the agent's version", async () => {
    for (const i of [0, 1, 2]) {
      let last: string[] = [];
      await waitUntil(
        async () => {
          last = (await agentsSeenAt(i)).seen;
          return JSON.stringify(last) === JSON.stringify(expectedAgents());
        },
        30_000,
        `fleet-${i + 1}'s status shows the agents where they are`,
      ).catch((err: Error) => {
        throw new Error(
          `${err.message}: saw ${JSON.stringify(last)}, expected ${JSON.stringify(expectedAgents())}`,
        );
      });
    }
    // An agent may hold a second stream to its instance for a moment (one being refused as a
    // duplicate after a server count change), which the summary honestly counts: poll for the
    // settled fleet rather than trusting one read.
    const settled = JSON.stringify(TENANTS.map((t) => [t, 1, [expectedHome(t)]]));
    let s = await fleetStatusAt(0);
    await waitUntil(
      async () => {
        s = await fleetStatusAt(0);
        return JSON.stringify(s.tenants.map((t) => [t.tenant, t.agents, t.instances])) === settled;
      },
      30_000,
      "fleet-1's summary shows one agent per tenant at its home",
    );
    expect(s.apiVersion).toBe("kgw.status/v1");
    expect(s.partial).toBe(false);
    expect(s.instances.map((x) => [x.id, x.lease, x.answered])).toEqual([
      ["fleet-1", "live", true],
      ["fleet-2", "live", true],
      ["fleet-3", "live", true],
    ]);
    expect(s.tenants.map((t) => [t.tenant, t.agents, t.instances])).toEqual(
      TENANTS.map((t) => [t, 1, [expectedHome(t)]]),
    );
    const detail = JSON.parse((await kgwStatus(["globex", adminUrl(2), "--json"])).stdout) as TenantStatus;
    expect(detail.tenant.agents[0]).toMatchObject({
      agentVersion: KGW_VERSION,
      transport: "tunnel",
      responsive: true,
    });
  }, 120_000);

  it("after kill -9 of one instance, each survivor shows the agents re-homed and the dead instance as not answering", async () => {
    await fleet[KILLED]!.kill9();
    const dead = fleet[KILLED]!.id;
    expect(expectedHome("globex")).toBe("fleet-3");
    for (const i of [0, 2]) {
      let last: unknown = null;
      await waitUntil(
        async () => {
          const { seen, status } = await agentsSeenAt(i);
          const entry = status.instances.find((x) => x.id === dead);
          last = { seen, entry };
          return (
            JSON.stringify(seen) === JSON.stringify(expectedAgents()) &&
            entry !== undefined &&
            entry.answered === false &&
            (entry.lease === "expired" || entry.lease === "gone")
          );
        },
        40_000,
        `fleet-${i + 1}'s status after the kill`,
      ).catch((err: Error) => {
        throw new Error(`${err.message}: last ${JSON.stringify(last)}`);
      });
      const s = await fleetStatusAt(i);
      expect(s.partial).toBe(true);
      const entry = s.instances.find((x) => x.id === dead)!;
      expect(entry).toMatchObject({ answered: false, agents: null });
      expect(entry.reason).toMatch(/lease (expired|gone)/);
      expect(s.instances.filter((x) => x.answered).map((x) => x.id)).toEqual(["fleet-1", "fleet-3"]);
    }
    // A tenant asking any survivor sees its own agent where it is, and that the answer is partial.
    // Polled like the reads above: a re-homed agent's duplicate stream, being refused, is listed
    // for a moment.
    type SelfStatus = { partial: boolean; tenant: TenantStatus["tenant"] };
    let own = await selfStatusAt(0, "globex");
    let mine = JSON.parse(own.body) as SelfStatus;
    await waitUntil(
      async () => {
        own = await selfStatusAt(0, "globex");
        mine = JSON.parse(own.body) as SelfStatus;
        return mine.tenant.agents.length === 1;
      },
      15_000,
      "globex's own status settled on one agent",
    );
    expect(own.status).toBe(200);
    expect(mine.partial).toBe(true);
    expect(mine.tenant.agents.map((a) => `${a.agentId}@${a.instance}`)).toEqual(["globex-agent@fleet-3"]);
    expect(own.body).not.toMatch(/acme|initech|peerAddress/);
    // The table says the same to a person: the dead instance listed, marked as not answering.
    const table = await kgwStatus([adminUrl(0)]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/PARTIAL: fleet-2 did not answer/);
    expect(table.stdout).toMatch(/fleet-2\s+(expired|gone)\s+no/);
  }, 120_000);

  it("an admin address that does not answer: exit 1, naming the address", async () => {
    const r = await kgwStatus([`--admin-url=http://127.0.0.1:${fleet[KILLED]!.ports.admin}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`http://127.0.0.1:${fleet[KILLED]!.ports.admin}`);
    expect(r.stderr).toContain("did not answer");
  }, 30_000);
});
