/**
 * A fleet member's bookkeeping without sockets: a Fleet on the embedded registry (behind a switch
 * that makes it unreachable), the gateway's BackendRegistry of agent streams played by fake
 * sessions. What an operator must see of the background work (ownership writes failing and
 * given up, claims superseded, dead instances swept) is logged with its tenant and agent and
 * counted in the metrics; 10,000 agents of one tenant leaving at once cost each a bounded amount
 * of work, counted (every look at a session reads its `info`), never timed.
 */
import { EventEmitter } from "node:events";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Fleet } from "../../lib/fleet/fleet.js";
import { FleetMetrics } from "../../lib/metrics/fleet-metrics.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { MAX_PENDING_RELEASES } from "../../lib/registry/durations.js";
import { RegistryUnavailableError } from "../../lib/registry/errors.js";
import type { FleetRegistry } from "../../lib/registry/fleet-registry.js";
import type { AgentSession } from "../../lib/server/core/agent-session.js";
import { BackendRegistry } from "../../lib/server/core/backend-registry.js";
import { DEFAULT_DIAL_TIMEOUT_MS } from "../../lib/tunnel/durations.js";
import { waitFor } from "../helpers/agent.js";
import { captureLogger } from "../helpers/gateway.js";
import { MemoryRegistry } from "../helpers/memory-registry.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki } from "../helpers/pki.js";
import { activeResources as resources } from "../helpers/resources.js";
import { lease, row, T0 } from "./registry.contract.js";

/** An agent stream as the registry and the fleet see it; counts every read of its identity. */
class FakeSession extends EventEmitter {
  readonly responsive = true;
  static reads = 0;
  constructor(private readonly who: { tenant: string; agentId: string }) {
    super();
  }
  get info(): { tenant: string; agentId: string } {
    FakeSession.reads++;
    return this.who;
  }
  leave(): void {
    this.emit("closed");
  }
}

const asSession = (s: FakeSession) => s as unknown as AgentSession;

/** The embedded registry behind a switch: while down, every call fails as DynamoDB's would. */
function switchable(inner: FleetRegistry) {
  let down = false;
  const registry = new Proxy(inner, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver);
      if (typeof value !== "function" || prop === "close") return value;
      return async (...args: unknown[]) => {
        if (down) throw new RegistryUnavailableError(`${String(prop)}: connect ECONNREFUSED (switched off)`);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return {
    registry,
    setDown(v: boolean) {
      down = v;
    },
  };
}

const stops: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
});

let baseline: Map<string, number>;
beforeAll(async () => {
  // The PKI first: its files and keys are made once per process and stay.
  await getPeerPki(await getTestPki());
  baseline = resources();
});
afterAll(async () => {
  // Every member stopped: no timer or socket of theirs is left behind.
  await waitFor(
    () => [...resources()].every(([k, n]) => n <= (baseline.get(k) ?? 0)),
    5_000,
    "no leaked handles",
  );
});

async function startMember(inner: MemoryRegistry) {
  const pki = await getTestPki();
  const peer = await getPeerPki(pki);
  const sw = switchable(inner);
  const { log, lines } = captureLogger();
  const metrics = new FleetMetrics(new ServerMetrics());
  const fleet = await Fleet.start({
    registry: sw.registry,
    instanceId: "me",
    peerAddress: "127.0.0.1:8135",
    backendDialTimeoutMs: DEFAULT_DIAL_TIMEOUT_MS,
    // Short, so that the sweeper (about once per lease) runs within the test.
    heartbeatMs: 300,
    leaseMs: 1_500,
    agentRedundancy: 2,
    peerTls: { cert: peer.peer.certPem, key: peer.peer.keyPem, ca: pki.ca.certPem },
    log,
    metrics,
    clock: () => T0,
  });
  stops.push(() => fleet.stop(1_000));
  const local = new BackendRegistry(() => undefined);
  fleet.directory(local);
  const counter = async (
    c: { get(): Promise<{ values: { labels: Record<string, unknown>; value: number }[] }> },
    labels: Record<string, string> = {},
  ) =>
    (await c.get()).values
      .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
      .reduce((n, v) => n + v.value, 0);
  const logged = (msg: string) =>
    lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.msg === msg && l.level !== "debug");
  return { fleet, local, metrics, setDown: sw.setDown, counter, logged };
}

const claimsDone = (fleet: Fleet) => fleet.state().registry.pendingClaims === 0;

describe("a fleet member's agents and rows", () => {
  it("lets 10,000 agents of one tenant leave at once at a bounded cost each, and releases every row", async () => {
    const inner = new MemoryRegistry({ clock: () => T0 });
    const m = await startMember(inner);
    const n = 10_000;
    const sessions = Array.from(
      { length: n },
      (_, i) => new FakeSession({ tenant: "acme", agentId: `node-${i}` }),
    );
    for (const s of sessions) m.local.add(asSession(s));
    await waitFor(() => claimsDone(m.fleet), 20_000, "every row claimed");
    expect((await inner.ownersOf("acme")).items).toHaveLength(n);
    FakeSession.reads = 0;
    for (const s of sessions) s.leave();
    // A scan of the tenant's agents per removal would read about n²/2 identities.
    const readsPerRemoval = FakeSession.reads / n;
    expect(readsPerRemoval).toBeLessThanOrEqual(4);
    expect(m.local.size).toBe(0);
    expect(m.local.agents("acme")).toEqual([]);
    await waitFor(
      async () => (await inner.ownersOf("acme")).items.length === 0,
      20_000,
      "every row released",
    );
  }, 60_000);

  it("keeps the row of an agent's stream left here when its other stream ends", async () => {
    const inner = new MemoryRegistry({ clock: () => T0 });
    const m = await startMember(inner);
    const first = new FakeSession({ tenant: "acme", agentId: "a" });
    const second = new FakeSession({ tenant: "acme", agentId: "a" });
    m.local.add(asSession(first));
    m.local.add(asSession(second));
    expect([...m.local.streamsOf("acme", "a")]).toEqual([first, second]);
    second.leave();
    await waitFor(() => claimsDone(m.fleet) && m.fleet.state().registry.pendingReleases === 0);
    expect((await inner.ownersOf("acme")).items.map((r) => r.agentId)).toEqual(["a"]);
    first.leave();
    await waitFor(async () => (await inner.ownersOf("acme")).items.length === 0, 5_000, "the row released");
  });

  it("logs and counts ownership writes failing and given up during an outage, and their recovery", async () => {
    const inner = new MemoryRegistry({ clock: () => T0 });
    const m = await startMember(inner);
    const n = MAX_PENDING_RELEASES + 50;
    const sessions = Array.from(
      { length: n },
      (_, i) => new FakeSession({ tenant: "acme", agentId: `node-${i}` }),
    );
    for (const s of sessions) m.local.add(asSession(s));
    await waitFor(() => claimsDone(m.fleet), 20_000, "every row claimed");
    m.setDown(true);
    const downAt = Date.now();
    for (const s of sessions) s.leave();
    await waitFor(
      async () =>
        (await m.counter(m.metrics.droppedReleases)) === 50 &&
        (await m.counter(m.metrics.registryErrors, { call: "ownership" })) >= 2 &&
        (await m.counter(m.metrics.registryErrors, { call: "sweep" })) >= 1,
      10_000,
      "deletions dropped, writes and a sweep failed, all counted",
    );
    const seconds = Math.ceil((Date.now() - downAt) / 1_000) + 1;
    expect(m.fleet.state().registry.pendingReleases).toBe(MAX_PENDING_RELEASES);
    const failed = m.logged("ownership row write failed; retrying with backoff");
    expect(failed[0]).toMatchObject({ level: "warn", tenant: "acme", write: "release" });
    expect(String(failed[0]?.agentId)).toMatch(/^node-\d+$/);
    const dropped = m.logged(
      "pending ownership row deletion dropped past its bound; the resync after the outage deletes the row",
    );
    expect(dropped[0]).toMatchObject({ level: "warn", tenant: "acme" });
    expect(String(dropped[0]?.agentId)).toMatch(/^node-\d+$/);
    // 50 dropped, a budget of lines a second: the rest at debug, the count says how many.
    expect(dropped.length).toBeLessThanOrEqual(5 * seconds);
    expect(
      m.logged("sweep of dead instances failed; the next one tries again").length,
    ).toBeGreaterThanOrEqual(1);
    m.setDown(false);
    await waitFor(async () => (await inner.ownersOf("acme")).items.length === 0, 30_000, "every row deleted");
    expect(m.logged("ownership row writes succeed again").length).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it("logs and counts a claim superseded by a newer incarnation, and what the sweeper removes", async () => {
    const inner = new MemoryRegistry({ clock: () => T0 });
    // A dead instance (expired long before the sweeper's grace) with a row.
    await inner.heartbeat(lease("dead", { heartbeatAt: T0 - 100_000 }));
    await inner.claim(row("acme", "old-node", "dead"));
    // A newer process with our id already wrote this agent's row (incarnation after ours, T0).
    await inner.claim(row("acme", "b", "me", { incarnation: T0 + 1 }));
    const m = await startMember(inner);
    m.local.add(asSession(new FakeSession({ tenant: "acme", agentId: "b" })));
    await waitFor(
      async () =>
        (await m.counter(m.metrics.supersededClaims)) >= 1 &&
        (await m.counter(m.metrics.swept, { item: "instances" })) === 1,
      10_000,
      "the superseded claim and the sweep counted",
    );
    expect(await m.counter(m.metrics.swept, { item: "rows" })).toBe(1);
    // Claimed once on connect, and again by the resync when the lease is first held.
    expect(
      m.logged("ownership row not claimed: a newer incarnation of this instance id holds it")[0],
    ).toMatchObject({ level: "warn", tenant: "acme", agentId: "b" });
    expect(m.logged("swept dead instances' leases and ownership rows")).toMatchObject([
      { level: "info", instances: ["dead"], instanceCount: 1, rows: 1 },
    ]);
    const text = await m.metrics.server.registry.metrics();
    expect(text).toMatch(/^kgw_fleet_ownership_claims_superseded_total [12]$/m);
    expect(text).toContain('kgw_fleet_swept_total{item="instances"} 1');
  });
});
