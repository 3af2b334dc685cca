/**
 * Which instances the status API lists and asks (lib/fleet/fleet-status-source.ts), with fake
 * leases and fake peer links: this instance answers for itself, live and draining peers are
 * asked (at most maxInFlight at once), expired ones are not, one the sweeper removed is still
 * listed for a while, and every peer that did not answer says why.
 */
import { describe, expect, it } from "vitest";
import { FleetStatusSource } from "../../lib/fleet/fleet-status-source.js";
import type { PeerInstance } from "../../lib/fleet/peer/peer-links.js";
import type { PeerStatusAnswer } from "../../lib/fleet/peer/peer-status-call.js";
import type { InstanceLease } from "../../lib/registry/model.js";
import { STATUS_GONE_REMEMBER_MS } from "../../lib/server/durations.js";
import type { InstanceSlice } from "../../lib/server/status/status-model.js";

const NOW = 1_000_000;

const lease = (id: string, over: Partial<InstanceLease> = {}): InstanceLease => ({
  instanceId: id,
  peerAddress: `127.0.0.1:${9000 + Number(id.slice(2))}`,
  incarnation: 1,
  heartbeatAt: NOW,
  expiresAt: NOW + 2000,
  draining: false,
  agents: 0,
  ...over,
});

const slice = (instance: string): InstanceSlice => ({
  apiVersion: "kgw.status/v1",
  instance,
  version: "0.1.0",
  startedAt: new Date(NOW).toISOString(),
  uptimeSeconds: 1,
  draining: false,
  agents: 0,
  tunnels: 0,
  tenants: [],
});

function setup(
  leases: InstanceLease[],
  answer: (peer: PeerInstance) => Promise<PeerStatusAnswer>,
  maxInFlight = 8,
) {
  let now = NOW;
  let current = new Map(leases.map((l) => [l.instanceId, l]));
  const asked: string[] = [];
  let inFlight = 0;
  let maxSeen = 0;
  const source = new FleetStatusSource({
    selfId: "i-1",
    clock: () => now,
    maxInFlight,
    instances: {
      all: () => current,
      judgeAt: () => now,
      peer: (id) => {
        const l = current.get(id);
        return l && { id, incarnation: l.incarnation, host: "127.0.0.1", port: 1 };
      },
    },
    links: {
      askStatus: async (peer) => {
        asked.push(peer.id);
        inFlight++;
        maxSeen = Math.max(maxSeen, inFlight);
        try {
          return await answer(peer);
        } finally {
          inFlight--;
        }
      },
    },
  });
  return {
    source,
    asked,
    maxSeen: () => maxSeen,
    setLeases: (ls: InstanceLease[]) => {
      current = new Map(ls.map((l) => [l.instanceId, l]));
    },
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("the fleet's status source", () => {
  it("answers for itself, asks live and draining peers, not expired ones; each says why it is missing", async () => {
    const s = setup(
      [
        lease("i-1"),
        lease("i-2"),
        lease("i-3", { draining: true }),
        lease("i-4", { expiresAt: NOW - 1 }),
        lease("i-5"),
      ],
      async (peer) => (peer.id === "i-2" ? { slice: slice("i-2") } : { failure: "timeout" }),
    );
    const answers = await s.source.statusOf(slice("i-1"), undefined);
    expect(s.asked.sort()).toEqual(["i-2", "i-3", "i-5"]);
    const byId = Object.fromEntries(answers.map((a) => [a.id, a]));
    expect(byId["i-1"]).toMatchObject({ lease: "live", slice: { instance: "i-1" }, reason: null });
    expect(byId["i-2"]).toMatchObject({ lease: "live", slice: { instance: "i-2" }, reason: null });
    expect(byId["i-3"]).toMatchObject({ lease: "draining", slice: null, reason: "timeout" });
    expect(byId["i-4"]).toMatchObject({ lease: "expired", slice: null, reason: "lease expired" });
    expect(byId["i-5"]).toMatchObject({ slice: null, reason: "timeout" });
  });

  it("an instance whose lease the sweeper removed is still listed as gone, then forgotten", async () => {
    const s = setup([lease("i-1"), lease("i-2")], async () => ({
      failure: "unreachable",
      detail: "ECONNREFUSED",
    }));
    s.source.remember();
    s.setLeases([lease("i-1")]);
    let answers = await s.source.statusOf(slice("i-1"), undefined);
    expect(answers.find((a) => a.id === "i-2")).toMatchObject({
      lease: "gone",
      slice: null,
      peerAddress: "127.0.0.1:9002",
      reason: expect.stringContaining("lease gone"),
    });
    expect(s.asked).toEqual([]);
    s.advance(STATUS_GONE_REMEMBER_MS + 1);
    s.source.remember();
    answers = await s.source.statusOf(slice("i-1"), undefined);
    expect(answers.map((a) => a.id)).toEqual(["i-1"]);
  });

  it("never asks more than maxInFlight peers at once, and asks each once", async () => {
    const peers = Array.from({ length: 20 }, (_, k) => lease(`i-${k + 2}`));
    const s = setup(
      [lease("i-1"), ...peers],
      (peer) => new Promise((r) => setImmediate(() => r({ slice: slice(peer.id) }))),
      3,
    );
    const answers = await s.source.statusOf(slice("i-1"), "acme");
    expect(s.maxSeen()).toBe(3);
    expect(s.asked.sort()).toEqual(peers.map((p) => p.instanceId).sort());
    expect(answers.every((a) => a.slice !== null)).toBe(true);
  });
});
