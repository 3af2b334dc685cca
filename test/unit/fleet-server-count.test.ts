/**
 * serverCount as a fleet instance tells it to agents: right from the first agent (the instance
 * counts itself, and re-reads the leases once its own is written), and announced again whenever a
 * read of the leases changes it, so that agents connected earlier follow a fleet that grew.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { Fleet } from "../../lib/fleet/fleet.js";
import { FleetMetrics } from "../../lib/metrics/fleet-metrics.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";
import { DEFAULT_DIAL_TIMEOUT_MS } from "../../lib/tunnel/durations.js";
import { MemoryRegistry } from "../helpers/memory-registry.js";
import { getTestPki } from "../helpers/pki.js";

const HEARTBEAT_MS = 50;
const LEASE_MS = 60_000;

const fleets: Fleet[] = [];
afterEach(async () => {
  for (const f of fleets.splice(0)) await f.stop(100);
});

/** Another instance's live lease, written straight into the registry. */
function otherInstance(registry: MemoryRegistry, id: string): Promise<void> {
  const now = Date.now();
  return registry.heartbeat({
    instanceId: id,
    peerAddress: "127.0.0.1:1",
    incarnation: now,
    heartbeatAt: now,
    expiresAt: now + LEASE_MS,
    draining: false,
    agents: 0,
  });
}

async function startFleet(registry: MemoryRegistry, id: string, agentRedundancy: number): Promise<Fleet> {
  const pki = await getTestPki();
  const fleet = await Fleet.start({
    registry,
    instanceId: id,
    peerAddress: "127.0.0.1:2",
    heartbeatMs: HEARTBEAT_MS,
    leaseMs: LEASE_MS,
    agentRedundancy,
    backendDialTimeoutMs: DEFAULT_DIAL_TIMEOUT_MS,
    peerTls: { cert: pki.server.certPem, key: pki.server.keyPem, ca: pki.ca.certPem },
    log: silentLogger(),
    metrics: new FleetMetrics(new ServerMetrics()),
  });
  fleets.push(fleet);
  return fleet;
}

describe("Fleet.serverCount", () => {
  it("counts this instance from the start, before its own lease has been read back", async () => {
    const registry = new MemoryRegistry();
    await otherInstance(registry, "b");
    const fleet = await startFleet(registry, "a", 2);
    // The first read of the leases came before this instance's own was written.
    expect(fleet.serverCount()).toBe(2);
  });

  it("announces a larger count once the leases show the fleet grew, and only on a change", async () => {
    const registry = new MemoryRegistry();
    const fleet = await startFleet(registry, "a", 3);
    const announced: number[] = [];
    fleet.onServerCountChange((n) => announced.push(n));
    await otherInstance(registry, "b");
    await vi.waitFor(() => expect(announced).toEqual([2]));
    await otherInstance(registry, "c");
    await vi.waitFor(() => expect(announced).toEqual([2, 3]));
    await otherInstance(registry, "d"); // beyond the redundancy asked for: no change
    await vi.waitFor(() => expect(fleet.instances.liveCount()).toBe(4));
    expect(announced).toEqual([2, 3]);
    expect(fleet.serverCount()).toBe(3);
  });
});
