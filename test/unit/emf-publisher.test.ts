import type { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import {
  EMF_RECORD_FIELD,
  EMF_RECORD_VALUE,
  type EmfMetricSpec,
  FAILED_DIAL_OUTCOMES,
  MAX_BREAKDOWN_VALUES,
} from "../../lib/metrics/emf/emf-catalog.js";
import { EMF_MAX_LINE_BYTES, EMF_MAX_METRICS_PER_DIRECTIVE } from "../../lib/metrics/emf/emf-document.js";
import { EmfPublisher, type EmfPublisherDeps } from "../../lib/metrics/emf/emf-publisher.js";
import { FleetMetrics } from "../../lib/metrics/fleet-metrics.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";
import { DIAL_OUTCOMES } from "../../lib/server/audit/audit-record.js";
import { emfProblems } from "../helpers/emf-spec.js";

type Doc = Record<string, unknown> & {
  _aws: {
    Timestamp: number;
    CloudWatchMetrics: {
      Namespace: string;
      Dimensions: string[][];
      Metrics: { Name: string; Unit: string }[];
    }[];
  };
};

const CTX = { namespace: "kgw", fleet: "Kgw-Stateful-RegistryTable-ABC", instance: "gw-1" };

/** A publisher on a registry, with a hand-driven timer and clock, and the lines it wrote. */
function harness(registry: Registry, overrides: Partial<EmfPublisherDeps> = {}, ctx = CTX) {
  const lines: string[] = [];
  const timers: { fn: () => void; ms: number; cancelled: boolean }[] = [];
  let errors = 0;
  let now = 1_760_000_000_000;
  const publisher = new EmfPublisher(ctx, 60_000, {
    registry,
    write: (l) => lines.push(l),
    now: () => now,
    schedule: (fn, ms) => {
      const t = { fn, ms, cancelled: false };
      timers.push(t);
      return { cancel: () => (t.cancelled = true) };
    },
    log: silentLogger(),
    onError: () => errors++,
    ...overrides,
  });
  /** The documents of the last set written, parsed, after checking each against the specification. */
  const take = (): Doc[] => {
    const docs = lines.splice(0).map((l) => {
      expect(emfProblems(l)).toEqual([]);
      expect(Buffer.byteLength(l)).toBeLessThanOrEqual(EMF_MAX_LINE_BYTES);
      return JSON.parse(l) as Doc;
    });
    for (const d of docs) expect(d[EMF_RECORD_FIELD]).toBe(EMF_RECORD_VALUE);
    return docs;
  };
  return {
    publisher,
    take,
    timers,
    errors: () => errors,
    advance: (ms: number) => (now += ms),
  };
}

/** The document holding the per-instance metrics, and the dimension sets each metric is under. */
function instanceDoc(docs: Doc[]) {
  const doc = docs.find((d) => d.Instance !== undefined)!;
  const sets = new Map<string, string[][]>();
  for (const directive of doc._aws.CloudWatchMetrics) {
    for (const m of directive.Metrics) sets.set(m.Name, directive.Dimensions);
  }
  return { doc, sets };
}

const breakdowns = (docs: Doc[], dimension: string) =>
  Object.fromEntries(
    docs
      .filter((d) => d[dimension] !== undefined)
      .map((d) => {
        expect(d._aws.CloudWatchMetrics[0]!.Dimensions).toEqual([["Fleet", dimension]]);
        const name = d._aws.CloudWatchMetrics[0]!.Metrics[0]!.Name;
        return [String(d[dimension]), d[name]];
      }),
  );

describe("the metrics for CloudWatch (EMF)", () => {
  it("writes gauges per instance, and counters per instance and fleet-wide, as valid EMF", async () => {
    const m = new ServerMetrics();
    m.readyBackends.set(3);
    m.establishedConnections.set(2);
    m.tenantDials.inc({ tenant: "acme", outcome: "ok" }, 5);
    m.tenantDials.inc({ tenant: "beta", outcome: "unavailable" }, 2);
    m.peerDials.inc({ outcome: "established" }, 4);
    m.peerDials.inc({ outcome: "not_here" });
    const h = harness(m.registry);
    await h.publisher.publish();
    const { doc, sets } = instanceDoc(h.take());
    expect(doc).toMatchObject({
      Fleet: CTX.fleet,
      Instance: "gw-1",
      Agents: 3,
      Tunnels: 2,
      Dials: 7,
      FailedDials: 2,
      PeerDials: 4,
    });
    expect(doc._aws.Timestamp).toBe(1_760_000_000_000);
    expect(sets.get("Agents")).toEqual([["Fleet", "Instance"]]);
    expect(sets.get("Tunnels")).toEqual([["Fleet", "Instance"]]);
    for (const name of ["Dials", "FailedDials", "PeerDials", "Refusals", "AuditRecordsDropped"]) {
      expect(sets.get(name)).toEqual([["Fleet", "Instance"], ["Fleet"]]);
    }
    // No fleet in this registry: no lease to report, and no registry errors.
    expect(sets.has("LeaseHeld")).toBe(false);
    expect(sets.has("RegistryErrors")).toBe(false);
  });

  it("writes a counter's increase since the previous set, and a breakdown only where it grew", async () => {
    const m = new ServerMetrics();
    const h = harness(m.registry);
    m.tenantDials.inc({ tenant: "acme", outcome: "ok" }, 5);
    m.tenantDials.inc({ tenant: "acme", outcome: "timeout" });
    await h.publisher.publish();
    let docs = h.take();
    expect(instanceDoc(docs).doc).toMatchObject({ Dials: 6, FailedDials: 1 });
    expect(breakdowns(docs, "Outcome")).toEqual({ ok: 5, timeout: 1 });

    m.tenantDials.inc({ tenant: "beta", outcome: "ok" });
    await h.publisher.publish();
    docs = h.take();
    expect(instanceDoc(docs).doc).toMatchObject({ Dials: 1, FailedDials: 0 });
    expect(breakdowns(docs, "Outcome")).toEqual({ ok: 1 });

    await h.publisher.publish();
    docs = h.take();
    expect(instanceDoc(docs).doc).toMatchObject({ Dials: 0, FailedDials: 0 });
    expect(docs).toHaveLength(1);
  });

  it("counts refusals by reason: quotas, egress rules and refused connections", async () => {
    const m = new ServerMetrics();
    const h = harness(m.registry);
    m.quotaRefusals.inc({ quota: "maxTunnels" }, 2);
    m.egressRefusals.inc({ rule: "link_local" });
    m.rejectedConnections.inc({ listener: "agent", reason: "ERR_UNAUTHENTICATED" });
    await h.publisher.publish();
    const docs = h.take();
    expect(instanceDoc(docs).doc.Refusals).toBe(4);
    expect(breakdowns(docs, "Reason")).toEqual({
      "quota:maxTunnels": 2,
      "egress:link_local": 1,
      "agent:ERR_UNAUTHENTICATED": 1,
    });
  });

  it(`names at most ${MAX_BREAKDOWN_VALUES} reasons a set and adds the rest under "other"`, async () => {
    const m = new ServerMetrics();
    const h = harness(m.registry);
    for (let i = 0; i < 25; i++)
      m.rejectedConnections.inc({ listener: "frontend", reason: `R${i}` }, 100 - i);
    await h.publisher.publish();
    const reasons = breakdowns(h.take(), "Reason");
    expect(Object.keys(reasons)).toHaveLength(MAX_BREAKDOWN_VALUES);
    expect(reasons["frontend:R0"]).toBe(100);
    // The six smallest (R19..R24: 81 down to 76) are summed.
    expect(reasons.other).toBe(81 + 80 + 79 + 78 + 77 + 76);
  });

  it("reports the lease and registry errors of an instance in a fleet", async () => {
    const m = new ServerMetrics();
    const fleet = new FleetMetrics(m);
    fleet.leaseHeld.set(1);
    fleet.registryErrors.inc({ call: "heartbeat" }, 3);
    const h = harness(m.registry);
    await h.publisher.publish();
    const { doc, sets } = instanceDoc(h.take());
    expect(doc).toMatchObject({ LeaseHeld: 1, RegistryErrors: 3 });
    expect(sets.get("LeaseHeld")).toEqual([["Fleet", "Instance"], ["Fleet"]]);
  });

  it("splits many metrics over documents within 4096 bytes and 100 metrics a directive", async () => {
    const m = new ServerMetrics();
    m.readyBackends.set(1);
    const many: Record<string, EmfMetricSpec> = {};
    for (let i = 0; i < 150; i++) {
      many[`m${i}`] = {
        name: `SomeRatherLongMetricName${i}`,
        unit: "Count",
        kind: "gauge",
        sources: [{ metric: "konnectivity_network_proxy_server_ready_backend_connections" }],
        fleetWide: i % 2 === 0,
        description: "",
      };
    }
    // The longest values a dimension takes.
    const longest = { namespace: "n".repeat(255), fleet: "f".repeat(255), instance: "i".repeat(255) };
    const h = harness(m.registry, { metrics: many, breakdowns: {} }, longest);
    await h.publisher.publish();
    const docs = h.take();
    expect(docs.length).toBeGreaterThan(1);
    const names = docs.flatMap((d) =>
      d._aws.CloudWatchMetrics.flatMap((dir) => {
        expect(dir.Metrics.length).toBeLessThanOrEqual(EMF_MAX_METRICS_PER_DIRECTIVE);
        return dir.Metrics.map((x) => x.Name);
      }),
    );
    expect(new Set(names).size).toBe(150);
  });

  it("runs one set per interval on its timer; stop writes the last counters and leaves no timer", async () => {
    const m = new ServerMetrics();
    const h = harness(m.registry);
    h.publisher.start();
    expect(h.timers).toHaveLength(1);
    expect(h.timers[0]!.ms).toBe(60_000);
    m.tenantDials.inc({ tenant: "acme", outcome: "ok" });
    h.timers[0]!.fn();
    await expect.poll(() => h.timers.length).toBe(2);
    expect(instanceDoc(h.take()).doc.Dials).toBe(1);

    m.tenantDials.inc({ tenant: "acme", outcome: "broken" });
    await h.publisher.stop();
    expect(h.timers[1]!.cancelled).toBe(true);
    expect(h.timers).toHaveLength(2);
    const last = instanceDoc(h.take());
    expect(last.doc).toMatchObject({ Dials: 1, FailedDials: 1 });
    // Counters only: a stopping instance's zero agents and released lease are not news.
    expect(last.sets.has("Agents")).toBe(false);
    expect(last.doc.Agents).toBeUndefined();
  });

  it("counts and logs a set it cannot read, and tries again at the next interval", async () => {
    let fail = true;
    const m = new ServerMetrics();
    const registry = {
      getMetricsAsJSON: () =>
        fail ? Promise.reject(new Error("collect failed")) : m.registry.getMetricsAsJSON(),
    } as unknown as Registry;
    const h = harness(registry);
    await h.publisher.publish();
    expect(h.errors()).toBe(1);
    expect(h.take()).toEqual([]);
    fail = false;
    await h.publisher.publish();
    expect(h.take()).toHaveLength(1);
  });

  it("counts as failed exactly the dial outcomes the audit log knows as failures", () => {
    for (const o of FAILED_DIAL_OUTCOMES) expect(DIAL_OUTCOMES).toContain(o);
    expect(FAILED_DIAL_OUTCOMES).not.toContain("ok");
    expect(FAILED_DIAL_OUTCOMES).not.toContain("denied");
  });
});

describe("the EMF specification check the tests use", () => {
  const valid = {
    Fleet: "f",
    Agents: 1,
    _aws: {
      Timestamp: 1,
      CloudWatchMetrics: [
        { Namespace: "kgw", Dimensions: [["Fleet"]], Metrics: [{ Name: "Agents", Unit: "Count" }] },
      ],
    },
  };
  const problems = (change: (d: typeof valid & Record<string, unknown>) => void) => {
    const d = structuredClone(valid) as typeof valid & Record<string, unknown>;
    change(d);
    return emfProblems(JSON.stringify(d));
  };

  it("passes a valid document and finds each broken rule", () => {
    expect(problems(() => {})).toEqual([]);
    expect(problems((d) => delete (d as Partial<typeof valid>)._aws)).not.toEqual([]);
    expect(problems((d) => (d._aws.CloudWatchMetrics[0]!.Namespace = ""))).not.toEqual([]);
    expect(problems((d) => (d._aws.CloudWatchMetrics[0]!.Metrics[0]!.Unit = "Things"))).not.toEqual([]);
    expect(problems((d) => (d.Agents = "1" as unknown as number))).not.toEqual([]);
    expect(problems((d) => (d.Fleet = 3 as unknown as string))).not.toEqual([]);
    expect(
      problems((d) => {
        const keys = Array.from({ length: 31 }, (_, i) => `D${i}`);
        for (const k of keys) d[k] = "v";
        d._aws.CloudWatchMetrics[0]!.Dimensions = [keys];
      }),
    ).not.toEqual([]);
    expect(
      problems((d) => {
        d._aws.CloudWatchMetrics[0]!.Metrics = Array.from({ length: 101 }, () => ({
          Name: "Agents",
          Unit: "Count",
        }));
      }),
    ).not.toEqual([]);
    expect(problems((d) => ((d._aws as Record<string, unknown>).Extra = 1))).not.toEqual([]);
  });
});
