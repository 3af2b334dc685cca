/**
 * Routing in a fleet without sockets: the owner cache (when it reads the registry, what it
 * trusts) and a routed dial's retries (not here → one re-read; unavailable → the next owner;
 * nobody → the single instance's own "no agent").
 */
import { describe, expect, it } from "vitest";
import { type GatewayError, NoAgentError, PeerNotHereError, PeerUnavailableError } from "../../lib/errors.js";
import { OwnerCache } from "../../lib/fleet/owner-cache.js";
import type { PeerInstance } from "../../lib/fleet/peer/peer-links.js";
import { RoutedDial, type RoutingDeps } from "../../lib/fleet/routed-dial.js";
import type { InstanceLease, OwnerRow } from "../../lib/registry/model.js";
import type { DialContext } from "../../lib/server/core/dial-context.js";
import type { BackendLink, DialHandle, FrontendEnd } from "../../lib/tunnel/endpoints.js";

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
const row = (tenant: string, instanceId: string): OwnerRow => ({
  tenant,
  agentId: `${tenant}-agent`,
  instanceId,
  incarnation: 1,
  session: 1,
  connectedAt: 0,
});

function fixture(rowsByTenant: Record<string, OwnerRow[]>, leases: InstanceLease[]) {
  let now = 0;
  const reads: string[] = [];
  const registry = {
    ownersOf: async (tenant: string) => {
      reads.push(tenant);
      return { items: rowsByTenant[tenant] ?? [], unreadable: [] };
    },
  };
  const leaseMap = new Map(leases.map((l) => [l.instanceId, l]));
  const cache = new OwnerCache({
    registry,
    instances: { all: () => leaseMap, refresh: async () => {} },
    selfId: "i1",
    clock: () => now,
    freshMs: 5_000,
    negativeFreshMs: 1_000,
    idleMs: 60_000,
  });
  return { cache, reads, leaseMap, advance: (ms: number) => (now += ms) };
}

describe("OwnerCache", () => {
  it("reads once on a miss, then answers from memory until the answer is stale", async () => {
    const f = fixture({ acme: [row("acme", "i2")] }, [lease("i1"), lease("i2")]);
    expect(f.cache.peek("acme")).toBeUndefined();
    expect(await f.cache.read("acme", "miss")).toEqual(["i2"]);
    for (let i = 0; i < 100; i++) expect(f.cache.peek("acme")).toEqual(["i2"]);
    expect(f.reads).toEqual(["acme"]);
    f.advance(5_001);
    // Stale: still answered, and re-read in the background (once, however many dials).
    expect(f.cache.peek("acme")).toEqual(["i2"]);
    expect(f.cache.peek("acme")).toEqual(["i2"]);
    await Promise.resolve();
    expect(f.reads).toEqual(["acme", "acme"]);
  });

  it("drops an owner whose lease expired or who drains, without a re-read", async () => {
    const f = fixture({ acme: [row("acme", "i2"), row("acme", "i3")] }, [
      lease("i1"),
      lease("i2"),
      lease("i3", { expiresAt: 2_000 }),
    ]);
    expect(await f.cache.read("acme", "miss")).toEqual(["i2", "i3"]);
    f.advance(2_000);
    expect(f.cache.peek("acme")).toEqual(["i2"]);
    f.leaseMap.set("i2", lease("i2", { draining: true }));
    // No live owner, and "none" is trusted only a second after a read: this one is 2 s old.
    expect(f.cache.peek("acme")).toBeUndefined();
    expect(f.reads).toEqual(["acme"]);
    expect(await f.cache.read("acme", "miss")).toEqual([]);
    expect(f.cache.peek("acme")).toEqual([]);
    f.advance(1_001);
    expect(f.cache.peek("acme")).toBeUndefined();
  });

  it("never names this instance, and shares one read among concurrent askers", async () => {
    const f = fixture({ acme: [row("acme", "i1"), row("acme", "i2")] }, [lease("i1"), lease("i2")]);
    const answers = await Promise.all([f.cache.read("acme", "miss"), f.cache.read("acme", "miss")]);
    expect(answers).toEqual([["i2"], ["i2"]]);
    expect(f.reads).toEqual(["acme"]);
  });
});

/** A frontend that records what it was told. */
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

const ctx = {
  caller: { tenant: "acme", principal: "token:t1", listener: "gateway" },
  frontend: "connect",
} as DialContext;
const link: BackendLink = { send: () => true, onceWritable: (cb) => cb(), close: () => {} };

/**
 * Routing deps whose peers answer as `answers` says, in order of the dials they get: a peer id
 * maps to what it does with each dial sent to it.
 */
function routing(
  owners: { peek: string[] | undefined; reads: string[][] },
  peers: Record<string, Array<"ok" | "not_here" | "unavailable" | "refused" | "throws">>,
  /**
   * What the live peers say, in turn, each time they are asked where the tenant's agents are
   * (the last answer repeats; no peers to ask when absent).
   */
  probed?: string[][],
) {
  const dialed: string[] = [];
  const readsDone: string[] = [];
  const asked: string[] = [];
  const deps: RoutingDeps = {
    local: {
      dial: () => {
        throw new NoAgentError("no agent connected for acme");
      },
    },
    owners: {
      peek: () => owners.peek,
      read: async (_t, why) => {
        readsDone.push(why);
        return owners.reads.shift() ?? [];
      },
    },
    instances: { peer: (id): PeerInstance => ({ id, host: "10.0.0.9", port: 8135 }) },
    links: {
      isHealthy: () => true,
      dial: (peer, _ctx, _req, frontend): DialHandle => {
        dialed.push(peer.id);
        const what = peers[peer.id]?.shift() ?? "unavailable";
        if (what === "throws") throw new PeerUnavailableError(peer.id, "marked failing");
        queueMicrotask(() => {
          if (what === "ok") frontend.established(link);
          else if (what === "not_here") frontend.dialFailed(new PeerNotHereError(peer.id, "not here"));
          else if (what === "unavailable") frontend.dialFailed(new PeerUnavailableError(peer.id, "gone"));
          else frontend.dialFailed(new NoAgentError("refused by the agent"));
        });
        return { cancel: () => {} };
      },
    },
    readTimeoutMs: 1_000,
    random: () => 0,
    ...(probed && {
      probe: {
        find: async (_t, why) => {
          asked.push(why ?? "registry_unreadable");
          return (probed.length > 1 ? probed.shift() : probed[0]) ?? [];
        },
      },
    }),
  };
  return { deps, dialed, readsDone, asked };
}

async function settle(told: { established?: BackendLink; failed?: GatewayError }) {
  for (let i = 0; i < 50 && !told.established && !told.failed; i++) await new Promise((r) => setImmediate(r));
}

describe("RoutedDial", () => {
  it("goes to a known owner with no registry read", async () => {
    const r = routing({ peek: ["i2"], reads: [] }, { i2: ["ok"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(told.established).toBe(link);
    expect(r.readsDone).toEqual([]);
  });

  it("on a miss, reads the owners first", async () => {
    const r = routing({ peek: undefined, reads: [["i3"]] }, { i3: ["ok"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.readsDone).toEqual(["miss"]);
    expect(told.established).toBe(link);
  });

  it("after 'not here', re-reads once and tries the new owner", async () => {
    const r = routing({ peek: ["i2"], reads: [["i3"]] }, { i2: ["not_here"], i3: ["ok"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.dialed).toEqual(["i2", "i3"]);
    expect(r.readsDone).toEqual(["not_here"]);
    expect(told.established).toBe(link);
  });

  it("when an owner is unavailable, tries the next before reading again", async () => {
    const r = routing({ peek: ["i2", "i3"], reads: [] }, { i2: ["throws"], i3: ["ok"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.dialed).toEqual(["i2", "i3"]);
    expect(r.readsDone).toEqual([]);
    expect(told.established).toBe(link);
  });

  it("passes the agent's own refusal to the caller, without trying elsewhere", async () => {
    const r = routing({ peek: ["i2", "i3"], reads: [] }, { i2: ["refused"], i3: ["ok"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.dialed).toEqual(["i2"]);
    expect(told.failed?.message).toBe("refused by the agent");
  });

  it("with no owner anywhere, answers as a single instance does, after at most one re-read", async () => {
    const r = routing({ peek: ["i2"], reads: [[]] }, { i2: ["not_here"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.readsDone).toEqual(["not_here"]);
    expect(told.failed).toBeInstanceOf(NoAgentError);
    expect(told.failed?.message).toBe("no agent connected for acme");
  });

  // The instance the agent moved to writes its row in the background: a dial that reads the
  // registry in between finds no owner, or still the one that said "not here".
  it.each([
    { registry: "names no owner", reads: [[]] },
    { registry: "still names the owner that said 'not here'", reads: [["i2"]] },
  ])(
    "after 'not here', when the registry $registry, asks the live peers and goes where they say",
    async ({ reads }) => {
      const r = routing({ peek: ["i2"], reads }, { i2: ["not_here"], i4: ["ok"] }, [["i4"]]);
      const { end, told } = recordingFrontend();
      new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
      await settle(told);
      expect(r.readsDone).toEqual(["not_here"]);
      expect(r.asked).toEqual(["no_live_owner"]);
      expect(r.dialed).toEqual(["i2", "i4"]);
      expect(told.established).toBe(link);
    },
  );

  it("asks the peers no more once they name only owners it tried: then answers 'no agent'", async () => {
    const r = routing({ peek: ["i2"], reads: [["i3"]] }, { i2: ["not_here"], i3: ["not_here"] }, [["i2"]]);
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.dialed).toEqual(["i2", "i3"]);
    expect(r.asked).toEqual(["no_live_owner"]);
    expect(told.failed).toBeInstanceOf(NoAgentError);
    expect(told.failed?.message).toBe("no agent connected for acme");
  });

  it("asks again when the owner the peers named says 'not here' (the agents moved again)", async () => {
    const r = routing({ peek: [], reads: [[]] }, { i3: ["not_here"], i4: ["ok"] }, [["i3"], ["i4"]]);
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.dialed).toEqual(["i3", "i4"]);
    expect(r.asked).toEqual(["no_live_owner", "no_live_owner"]);
    expect(told.established).toBe(link);
  });

  it("stops asking when each answer names an owner that says 'not here' once tried", async () => {
    const r = routing({ peek: [], reads: [[]] }, { i3: ["not_here"], i4: ["not_here"] }, [
      ["i3"],
      ["i4"],
      ["i3", "i4"],
    ]);
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.dialed).toEqual(["i3", "i4"]);
    expect(r.asked).toHaveLength(3);
    expect(told.failed).toBeInstanceOf(NoAgentError);
  });

  it("on a miss that reads no owner, asks the peers before answering (a new agent's row unwritten)", async () => {
    const r = routing({ peek: undefined, reads: [[]] }, { i4: ["ok"] }, [["i4"]]);
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.readsDone).toEqual(["miss"]);
    expect(r.asked).toEqual(["no_live_owner"]);
    expect(r.dialed).toEqual(["i4"]);
    expect(told.established).toBe(link);
  });

  it("when the cache knows no owner, asks the peers (not the registry) and answers 'no agent' if none has one", async () => {
    const r = routing({ peek: [], reads: [] }, {}, [[]]);
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start();
    await settle(told);
    expect(r.readsDone).toEqual([]);
    expect(r.asked).toEqual(["no_live_owner"]);
    expect(told.failed).toBeInstanceOf(NoAgentError);
    expect(told.failed?.message).toBe("no agent connected for acme");
  });

  it("without peers to ask, fails at once, synchronously, when the cache knows there is no owner", () => {
    const r = routing({ peek: [], reads: [] }, {});
    const { end } = recordingFrontend();
    expect(() => new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start()).toThrow(
      "no agent connected for acme",
    );
  });

  it("says nothing more once cancelled", async () => {
    const r = routing({ peek: undefined, reads: [["i2"]] }, { i2: ["ok"] });
    const { end, told } = recordingFrontend();
    new RoutedDial(r.deps, ctx, { protocol: "tcp", address: "x:1" }, end).start().cancel();
    for (let i = 0; i < 20; i++) await new Promise((res) => setImmediate(res));
    expect(r.dialed).toEqual([]);
    expect(told).toEqual({});
  });
});
