/**
 * A hung registry is an outage, not a verdict on the instances: two real `kgw server` processes
 * share one DynamoDB table (dynalite behind a front), and the front stops answering (connections
 * accepted, never answered, as a wedged endpoint or a stopped process behaves). Every request
 * then hangs until the client's timeouts give up (about 8 s with the SDK's attempts), far longer
 * than the 2 s lease used here, so for seconds each instance's lease has run out while its
 * heartbeat is still outstanding. /readyz on every instance is polled throughout: a load
 * balancer probing it must never see the whole fleet fail together.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import { type FleetInstance, makeFleet, tempDir, waitUntil } from "../helpers/fleet.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

/** How often /readyz is asked: a load balancer asks every few seconds; this is far denser. */
const POLL_MS = 50;

let dynamo: LocalDynamo;
let work: ReturnType<typeof tempDir>;
let fleet: FleetInstance[];
let baseline: Map<string, number>;

interface RegistryView {
  leaseHeld: boolean;
  consecutiveFailures: number;
  heartbeatOutstandingMs: number | null;
}

async function registryView(f: FleetInstance): Promise<RegistryView | null> {
  const v = (await f.verbose()) as { fleet?: { leaseHeld: boolean; registry: RegistryView } } | null;
  if (!v?.fleet) return null;
  const { consecutiveFailures, heartbeatOutstandingMs } = v.fleet.registry;
  return { leaseHeld: v.fleet.leaseHeld, consecutiveFailures, heartbeatOutstandingMs };
}

beforeAll(async () => {
  const pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = resources();
  work = tempDir("kgw-fleet-hung-");
  dynamo = await startLocalDynamo();
  fleet = await makeFleet(
    { pki, peerFiles: peer.files, table: dynamo.tableName, dynamoEnv: dynamo.env },
    2,
    work.dir,
  );
  await Promise.all(fleet.map((f) => f.start()));
});

afterAll(async () => {
  await Promise.all((fleet ?? []).map((f) => (f.running ? f.terminate() : undefined)));
  await dynamo?.close();
  await expectNoLeakedResources(baseline);
  work?.remove();
}, 30_000);

describe("a fleet whose registry hangs", () => {
  it("stays ready on every instance while heartbeats are outstanding past the lease, and after they fail", async () => {
    for (const f of fleet) expect(await f.readyz()).toBe(200);
    await dynamo.blackhole();
    const hungAt = Date.now();
    const notReady: string[] = [];
    let polls = 0;
    // Each instance goes through both phases of a hung registry: its lease runs out with the
    // heartbeat still outstanding (no failure counted yet), then the heartbeat fails on the
    // client's timeouts. The poll runs until every instance has been seen in both.
    const seenOutstanding = new Set<string>();
    const seenFailed = new Set<string>();
    let longestOutstanding = 0;
    try {
      await waitUntil(
        async () => {
          polls++;
          const at = Date.now() - hungAt;
          await Promise.all(
            fleet.map(async (f) => {
              const [status, view] = await Promise.all([f.readyz(), registryView(f)]);
              if (status !== 200) notReady.push(`${f.id} ${status} at ${at}ms`);
              if (view && !view.leaseHeld && view.consecutiveFailures === 0) seenOutstanding.add(f.id);
              if (view && view.consecutiveFailures > 0) seenFailed.add(f.id);
              longestOutstanding = Math.max(longestOutstanding, view?.heartbeatOutstandingMs ?? 0);
            }),
          );
          await new Promise((r) => setTimeout(r, POLL_MS));
          return seenOutstanding.size === fleet.length && seenFailed.size === fleet.length;
        },
        45_000,
        "every instance through a heartbeat outstanding past its lease and then failed",
      );
      const hungFor = Date.now() - hungAt;
      await dynamo.start();
      await waitUntil(
        async () => (await Promise.all(fleet.map(registryView))).every((v) => v?.leaseHeld === true),
        20_000,
        "every lease held again",
      );
      console.log(
        `fleet: DynamoDB hung ${hungFor} ms: ${polls} polls of ${fleet.length} instances, ${notReady.length} not ready${notReady.length ? ` (first ${notReady[0]}, last ${notReady.at(-1)})` : ""}`,
      );
      expect(notReady).toEqual([]);
      // The operator's view showed why: a heartbeat waiting longer than the whole 2 s lease.
      expect(longestOutstanding).toBeGreaterThan(2_000);
      for (const f of fleet) expect(await f.readyz()).toBe(200);
    } finally {
      await dynamo.start();
    }
  }, 90_000);
});
