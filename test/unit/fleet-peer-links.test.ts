/**
 * The peer links' policies without sockets: how long a failing peer is avoided (jittered,
 * bounded), how long a hopped dial waits (the fleet's --backend-dial-timeout), the probe of the
 * live peers that routing falls back on while the registry cannot be read, and the re-read of the
 * leases when a row names a newer incarnation than the one last read.
 */
import { describe, expect, it } from "vitest";
import { type GatewayError, NoAgentError } from "../../lib/errors.js";
import { InstanceView } from "../../lib/fleet/instance-view.js";
import { OwnerCache } from "../../lib/fleet/owner-cache.js";
import type { PeerAgentsAnswer } from "../../lib/fleet/peer/peer-agents-call.js";
import { type PeerInstance, peerBackoffMs } from "../../lib/fleet/peer/peer-link.js";
import { PeerProbe } from "../../lib/fleet/peer-probe.js";
import { RegistryHealth } from "../../lib/fleet/registry-health.js";
import { RoutedDial, type RoutingDeps } from "../../lib/fleet/routed-dial.js";
import { silentLogger } from "../../lib/observability/logger.js";
import type { InstanceLease, OwnerRow } from "../../lib/registry/model.js";
import type { DialContext } from "../../lib/server/core/dial-context.js";
import {
  PEER_DIAL_TIMEOUT_MARGIN_MS,
  PEER_FAILURE_BACKOFF_BASE_MS,
  PEER_FAILURE_BACKOFF_MAX_MS,
  peerDialTimeoutMs,
} from "../../lib/server/durations.js";
import type { BackendLink, DialHandle, FrontendEnd } from "../../lib/tunnel/endpoints.js";

const log = silentLogger();

const lease = (id: string, over: Partial<InstanceLease> = {}): InstanceLease => ({
  instanceId: id,
  peerAddress: `10.0.0.${id.slice(1)}:8135`,
  incarnation: 1,
  heartbeatAt: 0,
  expiresAt: 10_000,
  draining: false,
  agents: 1,
  ...over,
});

describe("peer failure backoff", () => {
  const timings = {
    failureBackoffBaseMs: PEER_FAILURE_BACKOFF_BASE_MS,
    failureBackoffMs: PEER_FAILURE_BACKOFF_MAX_MS,
  };

  it("starts short, doubles with each failure in a row, and stops at the cap", () => {
    const ceilings = [1, 2, 3, 4, 5, 6, 50].map((n) => peerBackoffMs(n, timings, () => 0));
    expect(ceilings).toEqual([500, 1000, 2000, 4000, 5000, 5000, 5000]);
  });

  it("is jittered below its ceiling, never above it and never below half", () => {
    const draws = [0, 0.25, 0.5, 0.999].map((r) => peerBackoffMs(3, timings, () => r));
    expect(draws[0]).toBe(2000);
    expect(new Set(draws).size).toBe(draws.length);
    for (const d of draws) expect(d).toBeGreaterThanOrEqual(1000);
  });
});

describe("a hopped dial's timeout", () => {
  it("is the fleet's --backend-dial-timeout plus a margin, and none when it is 0", () => {
    expect(peerDialTimeoutMs(30_000)).toBe(30_000 + PEER_DIAL_TIMEOUT_MARGIN_MS);
    expect(peerDialTimeoutMs(1_000)).toBe(1_000 + PEER_DIAL_TIMEOUT_MARGIN_MS);
    expect(peerDialTimeoutMs(0)).toBe(0);
  });
});

/** A fleet of leases i1 (this one) .. iN, each peer answering as `answers` says. */
function probeFixture(
  leases: InstanceLease[],
  answers: Record<string, PeerAgentsAnswer | Promise<PeerAgentsAnswer>>,
  opts: { unhealthy?: string[]; maxInFlight?: number } = {},
) {
  let now = 0;
  const asked: string[] = [];
  let inFlight = 0;
  let maxSeen = 0;
  const leaseMap = new Map(leases.map((l) => [l.instanceId, l]));
  const probe = new PeerProbe({
    selfId: "i1",
    instances: {
      all: () => leaseMap,
      judgeAt: () => now,
      peer: (id) => ({ id, host: "10.0.0.9", port: 8135, incarnation: leaseMap.get(id)?.incarnation ?? 0 }),
    },
    links: {
      isHealthy: (p: PeerInstance) => !(opts.unhealthy ?? []).includes(p.id),
      askAgents: async (p: PeerInstance) => {
        asked.push(p.id);
        inFlight++;
        maxSeen = Math.max(maxSeen, inFlight);
        const a = await (answers[p.id] ?? "unavailable");
        inFlight--;
        return a;
      },
    },
    log,
    clock: () => now,
    timeoutMs: 1_000,
    freshMs: 5_000,
    negativeFreshMs: 1_000,
    ...(opts.maxInFlight ? { maxInFlight: opts.maxInFlight } : {}),
  });
  return { probe, asked, maxInFlight: () => maxSeen, advance: (ms: number) => (now += ms) };
}

describe("PeerProbe", () => {
  it("asks the live, healthy peers (never itself, a dead or draining one, or one failing)", async () => {
    const f = probeFixture(
      [
        lease("i1"),
        lease("i2"),
        lease("i3", { expiresAt: -1 }),
        lease("i4", { draining: true }),
        lease("i5"),
        lease("i6"),
      ],
      { i2: { agents: 0 }, i5: { agents: 2 }, i6: "timeout" },
      { unhealthy: ["i6"] },
    );
    expect(await f.probe.find("acme")).toEqual(["i5"]);
    expect(f.asked.sort()).toEqual(["i2", "i5"]);
  });

  it("shares one probe among concurrent dials and keeps its answer for a while", async () => {
    const f = probeFixture([lease("i1"), lease("i2")], { i2: { agents: 1 } });
    expect(await Promise.all([f.probe.find("acme"), f.probe.find("acme")])).toEqual([["i2"], ["i2"]]);
    f.advance(4_000);
    expect(await f.probe.find("acme")).toEqual(["i2"]);
    expect(f.asked).toEqual(["i2"]);
    f.advance(1_001);
    await f.probe.find("acme");
    expect(f.asked).toEqual(["i2", "i2"]);
  });

  it("trusts 'nobody' only a second", async () => {
    const f = probeFixture([lease("i1"), lease("i2")], { i2: { agents: 0 } });
    expect(await f.probe.find("acme")).toEqual([]);
    expect(await f.probe.find("acme")).toEqual([]);
    f.advance(1_001);
    await f.probe.find("acme");
    expect(f.asked).toEqual(["i2", "i2"]);
  });

  it("asked because no owner took a dial, uses an answer naming owners only a second", async () => {
    const f = probeFixture([lease("i1"), lease("i2")], { i2: { agents: 1 } });
    expect(await f.probe.find("acme", "registry_unreadable")).toEqual(["i2"]);
    f.advance(500);
    expect(await f.probe.find("acme", "no_live_owner")).toEqual(["i2"]);
    expect(f.asked).toEqual(["i2"]);
    f.advance(501);
    expect(await f.probe.find("acme", "no_live_owner")).toEqual(["i2"]);
    expect(f.asked).toEqual(["i2", "i2"]);
  });

  it.each(["registry_unreadable", "no_live_owner"] as const)(
    "asked because %s, asks again when the answer kept names only owners the dial tried",
    async (why) => {
      const f = probeFixture([lease("i1"), lease("i2"), lease("i3")], {
        i2: { agents: 1 },
        i3: { agents: 0 },
      });
      expect(await f.probe.find("acme", why)).toEqual(["i2"]);
      expect(await f.probe.find("acme", why, new Set(["i3"]))).toEqual(["i2"]);
      expect(f.asked.sort()).toEqual(["i2", "i3"]);
      await f.probe.find("acme", why, new Set(["i2"]));
      expect(f.asked.sort()).toEqual(["i2", "i2", "i3", "i3"]);
    },
  );

  it("answers at the first peer that holds agents, without waiting for a silent one", async () => {
    const never = new Promise<PeerAgentsAnswer>(() => {});
    const f = probeFixture([lease("i1"), lease("i2"), lease("i3")], { i2: never, i3: { agents: 1 } });
    expect(await f.probe.find("acme")).toEqual(["i3"]);
  });

  it("asks a large fleet a bounded number of peers at a time", async () => {
    const leases = [lease("i1"), ...Array.from({ length: 20 }, (_, k) => lease(`i${k + 2}`))];
    const f = probeFixture(leases, { i21: { agents: 1 } }, { maxInFlight: 4 });
    expect(await f.probe.find("acme")).toEqual(["i21"]);
    expect(f.asked).toHaveLength(20);
    expect(f.maxInFlight()).toBe(4);
  });
});

const ctx = {
  caller: { tenant: "acme", principal: "token:t1", listener: "gateway" },
  frontend: "connect",
} as DialContext;
const link: BackendLink = { send: () => true, onceWritable: (cb) => cb(), close: () => {} };

function recordingFrontend() {
  const told: { established?: BackendLink; failed?: GatewayError } = {};
  const end: FrontendEnd = {
    established: (l) => {
      told.established = l;
    },
    dialFailed: (e) => {
      told.failed = e;
    },
    deliver: () => true,
    onceWritable: (cb) => cb(),
    closed: () => {},
  };
  return { end, told };
}

/** Routing whose registry read fails (or hangs), and whose probe finds `probed`. */
function routingWithProbe(opts: {
  read: "fails" | "hangs" | "answers";
  registryDown: boolean;
  probed: string[];
  probeAfterMs?: number;
}) {
  const dialed: string[] = [];
  const reads: string[] = [];
  const probes: string[] = [];
  const deps: RoutingDeps = {
    local: {
      dial: () => {
        throw new NoAgentError("no agent connected for acme");
      },
    },
    owners: {
      peek: () => undefined,
      read: (_t, why) => {
        reads.push(why);
        if (opts.read === "answers") return Promise.resolve(["i4"]);
        return opts.read === "fails" ? Promise.reject(new Error("ECONNREFUSED")) : new Promise(() => {});
      },
    },
    instances: { peer: (id) => ({ id, host: "10.0.0.9", port: 8135 }) },
    links: {
      isHealthy: () => true,
      dial: (peer, _ctx, _req, frontend): DialHandle => {
        dialed.push(peer.id);
        queueMicrotask(() => frontend.established(link));
        return { cancel: () => {} };
      },
    },
    readTimeoutMs: 60_000,
    probeAfterMs: opts.probeAfterMs ?? 60_000,
    probe: {
      find: async (tenant) => {
        probes.push(tenant);
        return opts.probed;
      },
    },
    registry: { down: () => opts.registryDown, readFailed: () => reads.push("failed") },
    random: () => 0,
  };
  return { deps, dialed, reads, probes };
}

async function settle(told: { established?: BackendLink; failed?: GatewayError }) {
  for (let i = 0; i < 50 && !told.established && !told.failed; i++) await new Promise((r) => setImmediate(r));
}

describe("RoutedDial while the registry cannot be read", () => {
  it("asks the peers when the read fails, and dials the one that holds agents", async () => {
    const r = routingWithProbe({ read: "fails", registryDown: false, probed: ["i3"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.reads).toEqual(["miss", "failed"]);
    expect(r.probes).toEqual(["acme"]);
    expect(r.dialed).toEqual(["i3"]);
    expect(told.established).toBe(link);
  });

  it("does not wait on a registry known to be down", async () => {
    const r = routingWithProbe({ read: "hangs", registryDown: true, probed: ["i2"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.reads).toEqual([]);
    expect(told.established).toBe(link);
  });

  it("asks the peers beside a read that does not answer, and takes the first owner named", async () => {
    const r = routingWithProbe({ read: "hangs", registryDown: false, probed: ["i2"], probeAfterMs: 0 });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    for (let i = 0; i < 100 && !told.established; i++) await new Promise((res) => setTimeout(res, 10));
    expect(r.reads).toEqual(["miss"]);
    expect(r.probes).toEqual(["acme"]);
    expect(r.dialed).toEqual(["i2"]);
  });

  it("asks no peer when the read answers in time", async () => {
    const r = routingWithProbe({ read: "answers", registryDown: false, probed: ["i2"], probeAfterMs: 0 });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    // A timer set now fires after the hedge would have (same delay, set later): it did not.
    await new Promise((res) => setTimeout(res, 0));
    expect(r.probes).toEqual([]);
    expect(r.dialed).toEqual(["i4"]);
  });

  it("says why when neither the registry nor any peer knows", async () => {
    const r = routingWithProbe({ read: "fails", registryDown: false, probed: [] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(told.failed).toBeInstanceOf(NoAgentError);
    expect(told.failed?.message).toContain("no live peer holds an agent of the tenant");
  });
});

describe("RegistryHealth", () => {
  it("is down while the leases' reads fail, and for a while after a routing read failed", () => {
    let now = 0;
    let leasesFailing = false;
    const health = new RegistryHealth({
      leaseReadsFailing: () => leasesFailing,
      clock: () => now,
      downMs: 5_000,
    });
    expect(health.down()).toBe(false);
    leasesFailing = true;
    expect(health.down()).toBe(true);
    leasesFailing = false;
    health.readFailed();
    now += 4_999;
    expect(health.down()).toBe(true);
    now += 1;
    expect(health.down()).toBe(false);
  });
});

describe("InstanceView while a read of the leases hangs", () => {
  it("judges the leases as of the last good read once no read succeeded for two intervals", async () => {
    let now = 0;
    let hang = false;
    const view = new InstanceView({
      registry: {
        listInstances: () =>
          hang
            ? new Promise(() => {})
            : Promise.resolve({ items: [lease("i2", { expiresAt: 2_000 })], unreadable: [] }),
      },
      refreshMs: 300,
      log,
      clock: () => now,
    });
    await view.refresh();
    expect(view.liveCount()).toBe(1);
    hang = true;
    void view.refresh(); // never answers
    now = 600;
    expect(view.readsFailing).toBe(false);
    now = 601;
    expect(view.readsFailing).toBe(true);
    // Past the lease's expiry by the clock, but no read could have renewed it: still alive.
    now = 5_000;
    expect(view.liveCount()).toBe(1);
    expect(view.peer("i2")?.incarnation).toBe(1);
  });
});

describe("OwnerCache and an instance restarted in place", () => {
  it("re-reads the leases when a row names a newer incarnation than the one read", async () => {
    const row: OwnerRow = {
      tenant: "acme",
      agentId: "acme-agent",
      instanceId: "i2",
      incarnation: 2,
      session: 1,
      connectedAt: 0,
    };
    let leases = new Map([["i2", lease("i2", { incarnation: 1 })]]);
    let refreshes = 0;
    const cache = new OwnerCache({
      registry: { ownersOf: async () => ({ items: [row], unreadable: [] }) },
      instances: {
        all: () => leases,
        refresh: async () => {
          refreshes++;
          leases = new Map([["i2", lease("i2", { incarnation: 2 })]]);
        },
      },
      selfId: "i1",
      clock: () => 0,
    });
    expect(await cache.read("acme", "miss")).toEqual(["i2"]);
    expect(refreshes).toBe(1);
  });
});
