/**
 * One audit record per dial in a fleet: two real `kgw server` processes on one DynamoDB table
 * (dynalite), each writing its audit records to stdout (`--audit-log=-`, read back from its
 * output), tenant acme's agent on the first. A dial entering at the second is forwarded over a
 * peer link: the second instance (where the caller's dial arrived) writes its one record, naming
 * itself, the owner and the owner's agent, under one dial id; the owner writes none, and the
 * dial counts once in the fleet's kgw_tenant_dials_total.
 */
import { connect as netConnect } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import { startTestAgent } from "../helpers/agent.js";
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
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { overrideProcessEnv } from "../helpers/process-env.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

let pki: TestPki;
let dynamo: LocalDynamo;
let work: ReturnType<typeof tempDir>;
let fleet: FleetInstance[];
let acme: CreatedFleetTenant;
let backend: TenantBackend;
let agent: RunningAgent | undefined;
let front: TcpFront | undefined;
let baseline: Map<string, number>;
let restoreEnv: (() => void) | undefined;

/** The audit records instance `f` wrote to its stdout (its log lines are the other lines). */
function auditOf(f: FleetInstance): DialAuditRecord[] {
  const out: DialAuditRecord[] = [];
  for (const line of f.log().split("\n")) {
    if (!line.startsWith("{")) continue;
    const rec = JSON.parse(line) as Record<string, unknown>;
    if ("outcome" in rec && "destination" in rec && !("level" in rec))
      out.push(rec as unknown as DialAuditRecord);
  }
  return out;
}

/** A sample of instance `f`'s Prometheus text, summed over the series matching `labels`. */
async function metric(f: FleetInstance, name: string, labels: string): Promise<number> {
  let n = 0;
  for (const line of (await f.metrics()).split("\n")) {
    if (line.startsWith(`${name}{`) && line.includes(labels))
      n += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return n;
}

beforeAll(async () => {
  pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = resources();
  work = tempDir("kgw-fleet-audit-");
  dynamo = await startLocalDynamo();
  restoreEnv = overrideProcessEnv(dynamo.env);
  acme = await createTableTenant(pki, dynamo.tableName, "acme", work.dir);
  backend = await startTenantBackend("acme");
  fleet = await makeFleet(
    {
      pki,
      peerFiles: peer.files,
      table: dynamo.tableName,
      dynamoEnv: dynamo.env,
      flags: ["--audit-log=-"],
    },
    2,
    work.dir,
  );
  await Promise.all(fleet.map((f) => f.start()));
  // acme's agent on fleet-1 only (the front keeps it on the first instance that answers).
  front = await startTcpFront(() => [fleet[0]!.ports.agent], "sticky");
  ({ agent } = await startTestAgent(
    pki,
    front.port,
    [`--agent-token=${acme.agentToken}`, "--agent-id=acme-agent"],
    { connectSocket: () => netConnect({ host: "127.0.0.1", port: backend.port }) },
  ));
  await waitUntil(
    async () => (await fleet[0]!.agentsOf("acme")).includes(": ready:"),
    10_000,
    "acme's agent on fleet-1",
  );
}, 60_000);

afterEach((ctx) => {
  if (ctx.task.result?.state !== "fail") return;
  for (const f of fleet ?? [])
    console.log(`---- ${f.id}:\n${f.log().trim().split("\n").slice(-30).join("\n")}`);
});

afterAll(async () => {
  await agent?.stop();
  await front?.close();
  await Promise.all((fleet ?? []).map((f) => (f.running ? f.terminate() : undefined)));
  await backend?.close();
  await dynamo?.close();
  restoreEnv?.();
  await expectNoLeakedResources(baseline);
  work?.remove();
}, 30_000);

describe("a dial forwarded over a peer link", () => {
  it("leaves one record, at the instance it entered, naming the owner and its agent, and counts once", async () => {
    const [owner, origin] = [fleet[0]!, fleet[1]!];
    const target = `127.0.0.1:${backend.port}`;
    // Until acme's agent is connected at fleet-1 (and fleet-2 has read fleet-1's lease), a dial
    // at fleet-2 is 503.
    await waitUntil(
      () =>
        dialWhoami(pki, origin.ports.agent, acme.callerToken, target).then(
          (got) => got === "acme",
          () => false,
        ),
      15_000,
      "a dial at fleet-2 reaching acme's agent on fleet-1",
    );
    const hopped = () => auditOf(origin).filter((r) => r.outcome === "ok");
    await waitUntil(() => hopped().length >= 1, 5000, "fleet-2's record of the forwarded dial");
    // Every dial that reached the agent has ended at the owner too: whatever it would record of
    // them is written by now.
    await waitUntil(
      async () =>
        (await metric(owner, "konnectivity_network_proxy_server_established_connections", "")) === 0,
      5000,
      "the owner's end of the tunnels closed",
    );
    // Dials tried before routing could find the agent were refused at fleet-2 (503) and recorded there.
    const atOrigin = auditOf(origin);
    const atOwner = auditOf(owner);
    const dials = async (f: FleetInstance) => metric(f, "kgw_tenant_dials_total", 'tenant="acme"');
    console.log(
      `records of acme: fleet-1 ${atOwner.length}, fleet-2 ${atOrigin.length} (${hopped().length} ok); kgw_tenant_dials_total fleet-1 ${await dials(owner)}, fleet-2 ${await dials(origin)}; ${JSON.stringify([...atOwner, ...hopped()])}`,
    );
    expect(atOwner).toEqual([]);
    expect(hopped()).toHaveLength(1);
    expect(hopped()[0]).toMatchObject({
      tenant: "acme",
      instance: origin.id,
      owner: owner.id,
      agentId: "acme-agent",
      destination: target,
      outcome: "ok",
    });
    expect(hopped()[0]!.dialId).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(atOrigin.map((r) => r.dialId)).size).toBe(atOrigin.length);
    // Counted once, in the fleet's sum: as many dials as records.
    expect((await dials(owner)) + (await dials(origin))).toBe(atOrigin.length);
    expect(await metric(owner, "kgw_server_peer_dials_served_total", 'outcome="established"')).toBe(1);

    // A dial entering at the owner: its record there names it as both.
    expect(await dialWhoami(pki, owner.ports.agent, acme.callerToken, target)).toBe("acme");
    await waitUntil(() => auditOf(owner).length === 1, 5000, "fleet-1's record of its own dial");
    expect(auditOf(owner)[0]).toMatchObject({ instance: owner.id, owner: owner.id, agentId: "acme-agent" });
  });
});
