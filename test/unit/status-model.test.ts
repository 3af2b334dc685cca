/**
 * The status model without sockets: the per-tenant ring of per-minute counters (a window that
 * forgets, bounds that hold), credentials' last use, the fleet's merge of its instances' slices
 * (a dead instance listed with why, sums over those that answered), and what is believed of a
 * peer's answer.
 */
import { describe, expect, it } from "vitest";
import { parseSlice } from "../../lib/fleet/peer/peer-status-call.js";
import { STATUS_BUCKET_MS, STATUS_WINDOW_MS } from "../../lib/server/durations.js";
import {
  CredentialUseBook,
  MAX_TRACKED_CREDENTIALS_PER_TENANT,
} from "../../lib/server/status/credential-use.js";
import { fleetStatus, type InstanceAnswer, tenantStatus } from "../../lib/server/status/fleet-status.js";
import type { InstanceSlice, TenantSlice } from "../../lib/server/status/status-model.js";
import { TenantActivity } from "../../lib/server/status/tenant-activity.js";

const T0 = Date.parse("2026-12-05T12:00:00Z");

describe("TenantActivity: each tenant's dials over the last minutes", () => {
  it("counts dials by outcome and failures by code; ok and cancelled are not failures", () => {
    const a = new TenantActivity("i-1", () => T0);
    a.dialEnded("acme", { outcome: "ok", code: null, dialId: "d1" });
    a.dialEnded("acme", { outcome: "cancelled", code: "ERR_DIAL_CANCELLED", dialId: "d2" });
    a.dialEnded("acme", { outcome: "denied", code: "ERR_QUOTA", dialId: "d3" });
    a.dialEnded("acme", { outcome: "unavailable", code: "ERR_NO_AGENT", dialId: "d4" });
    expect(a.recent("acme")).toEqual({
      windowMinutes: STATUS_WINDOW_MS / STATUS_BUCKET_MS,
      dials: { ok: 1, cancelled: 1, denied: 1, unavailable: 1 },
      failures: { ERR_QUOTA: 1, ERR_NO_AGENT: 1 },
    });
    expect(a.lastError("acme")).toEqual({
      at: new Date(T0).toISOString(),
      code: "ERR_NO_AGENT",
      outcome: "unavailable",
      dialId: "d4",
      instance: "i-1",
    });
    expect(a.recent("globex")).toMatchObject({ dials: {}, failures: {} });
  });

  it("forgets what is older than the window, and keeps no more buckets than it holds", () => {
    let now = T0;
    const a = new TenantActivity("i-1", () => now);
    a.dialEnded("acme", { outcome: "denied", code: "ERR_FORBIDDEN", dialId: "old" });
    // One dial a minute for an hour: only the window's minutes count.
    for (let m = 1; m <= 60; m++) {
      now = T0 + m * STATUS_BUCKET_MS;
      a.dialEnded("acme", { outcome: "ok", code: null, dialId: `d${m}` });
    }
    const recent = a.recent("acme");
    expect(recent.dials).toEqual({ ok: STATUS_WINDOW_MS / STATUS_BUCKET_MS });
    expect(recent.failures).toEqual({});
    // The last error stays (it says when it was), the counts of its minute do not.
    expect(a.lastError("acme")?.dialId).toBe("old");
    now += STATUS_WINDOW_MS;
    expect(a.recent("acme").dials).toEqual({});
  });

  it("tracks tunnels open, never below zero", () => {
    const a = new TenantActivity("i-1", () => T0);
    a.tunnel("acme", 1);
    a.tunnel("acme", 1);
    a.tunnel("acme", -1);
    expect(a.openTunnels("acme")).toBe(1);
    a.tunnel("acme", -1);
    a.tunnel("acme", -1);
    expect(a.openTunnels("acme")).toBe(0);
  });

  it("keeps at most maxTenants, dropping the least recently active one without open tunnels", () => {
    const a = new TenantActivity("i-1", () => T0, 3);
    a.tunnel("busy", 1);
    for (const t of ["t1", "t2", "t3", "t4"]) a.dialEnded(t, { outcome: "ok", code: null, dialId: t });
    expect(a.tenantIds().sort()).toEqual(["busy", "t3", "t4"]);
  });
});

describe("CredentialUseBook: when each credential last authenticated", () => {
  it("lists a tenant's credentials, most recent first, with their role", () => {
    let now = T0;
    const b = new CredentialUseBook(() => now);
    b.used("acme", "agent", ["token:aaaa"]);
    now += 1000;
    b.used("acme", "caller", ["cert:01", "token:bbbb"]);
    now += 1000;
    b.used("acme", "agent", ["token:aaaa"]);
    b.used("globex", "caller", ["token:cccc"]);
    expect(b.of("acme")).toEqual([
      { id: "token:aaaa", role: "agent", lastUsed: new Date(T0 + 2000).toISOString() },
      { id: "token:bbbb", role: "caller", lastUsed: new Date(T0 + 1000).toISOString() },
      { id: "cert:01", role: "caller", lastUsed: new Date(T0 + 1000).toISOString() },
    ]);
    expect(b.of("initech")).toEqual([]);
  });

  it("is bounded per tenant: the least recently used go first", () => {
    const b = new CredentialUseBook(() => T0);
    for (let i = 0; i <= MAX_TRACKED_CREDENTIALS_PER_TENANT; i++) b.used("acme", "caller", [`token:${i}`]);
    const ids = b.of("acme").map((c) => c.id);
    expect(ids).toHaveLength(MAX_TRACKED_CREDENTIALS_PER_TENANT);
    expect(ids).not.toContain("token:0");
  });
});

const tenantSlice = (tenant: string, instance: string, over: Partial<TenantSlice> = {}): TenantSlice => ({
  tenant,
  agents: [
    {
      agentId: `${tenant}-agent`,
      instance,
      remoteAddress: "10.0.0.1:5555",
      transport: "tunnel",
      agentVersion: "0.1.0",
      connectedSince: new Date(T0).toISOString(),
      lastSeen: new Date(T0).toISOString(),
      responsive: true,
      load: 0,
    },
  ],
  openTunnels: 1,
  recent: { windowMinutes: 15, dials: { ok: 2 }, failures: {} },
  lastError: null,
  credentials: [],
  ...over,
});

const slice = (instance: string, tenants: TenantSlice[]): InstanceSlice => ({
  apiVersion: "kgw.status/v1",
  instance,
  version: "0.1.0",
  startedAt: new Date(T0).toISOString(),
  uptimeSeconds: 60,
  draining: false,
  agents: tenants.reduce((n, t) => n + t.agents.length, 0),
  tunnels: 0,
  tenants,
});

describe("the fleet's status from its instances' slices", () => {
  const answers: InstanceAnswer[] = [
    {
      id: "i-2",
      peerAddress: "10.0.0.2:8135",
      lease: "live",
      leaseExpiresAt: T0,
      slice: slice("i-2", [
        tenantSlice("acme", "i-2", {
          recent: { windowMinutes: 15, dials: { ok: 1, denied: 2 }, failures: { ERR_QUOTA: 2 } },
          lastError: {
            at: "2026-12-05T12:00:02.000Z",
            code: "ERR_QUOTA",
            outcome: "denied",
            dialId: "d2",
            instance: "i-2",
          },
          credentials: [{ id: "token:aaaa", role: "caller", lastUsed: "2026-12-05T12:00:02.000Z" }],
        }),
      ]),
      reason: null,
    },
    {
      id: "i-1",
      peerAddress: "10.0.0.1:8135",
      lease: "live",
      leaseExpiresAt: T0,
      slice: slice("i-1", [
        tenantSlice("acme", "i-1", {
          lastError: {
            at: "2026-12-05T12:00:01.000Z",
            code: "ERR_NO_AGENT",
            outcome: "unavailable",
            dialId: "d1",
            instance: "i-1",
          },
          credentials: [{ id: "token:aaaa", role: "caller", lastUsed: "2026-12-05T12:00:09.000Z" }],
        }),
        tenantSlice("globex", "i-1"),
      ]),
      reason: null,
    },
    {
      id: "i-3",
      peerAddress: "10.0.0.3:8135",
      lease: "expired",
      leaseExpiresAt: T0,
      slice: null,
      reason: "lease expired",
    },
  ];

  it("lists every instance, the dead one with its reason, and says the answer is partial", () => {
    const s = fleetStatus("i-1", answers, T0);
    expect(s.partial).toBe(true);
    expect(s.instances.map((i) => [i.id, i.answered, i.reason])).toEqual([
      ["i-1", true, null],
      ["i-2", true, null],
      ["i-3", false, "lease expired"],
    ]);
    expect(s.instances[2]).toMatchObject({ lease: "expired", agents: null, version: null });
  });

  it("sums a tenant over the instances that answered: agents where they are, dials, the latest error", () => {
    const s = fleetStatus("i-1", answers, T0);
    expect(s.tenants.map((t) => t.tenant)).toEqual(["acme", "globex"]);
    expect(s.tenants[0]).toMatchObject({
      agents: 2,
      instances: ["i-1", "i-2"],
      openTunnels: 2,
      recent: { dials: { ok: 3, denied: 2 }, failures: { ERR_QUOTA: 2 } },
      lastError: { code: "ERR_QUOTA", instance: "i-2" },
    });
  });

  it("one tenant in detail: each credential once, with its latest use anywhere", () => {
    const s = tenantStatus("i-1", answers, "acme", T0);
    expect(s.tenant.agents.map((a) => a.instance)).toEqual(["i-1", "i-2"]);
    expect(s.tenant.credentials).toEqual([
      { id: "token:aaaa", role: "caller", lastUsed: "2026-12-05T12:00:09.000Z" },
    ]);
    expect(tenantStatus("i-1", answers, "initech", T0).tenant.agents).toEqual([]);
  });
});

describe("what is believed of a peer's answer", () => {
  it.each([
    ["not JSON", Buffer.from("{nope")],
    ["another version", Buffer.from(JSON.stringify({ ...slice("p", []), apiVersion: "kgw.status/v0" }))],
    ["tenants not a list", Buffer.from(JSON.stringify({ ...slice("p", []), tenants: {} }))],
    [
      "a tenant without agents",
      Buffer.from(JSON.stringify({ ...slice("p", []), tenants: [{ tenant: "a" }] })),
    ],
    ["null", Buffer.from("null")],
  ])("%s: malformed, not merged", (_what, message) => {
    expect(parseSlice(message)).toMatchObject({ failure: "malformed" });
  });

  it("a v1 slice is taken as it is", () => {
    const s = slice("p", [tenantSlice("acme", "p")]);
    expect(parseSlice(Buffer.from(JSON.stringify(s)))).toEqual({ slice: s });
  });
});
