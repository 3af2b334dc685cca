import { describe, expect, it } from "vitest";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { OTHER_TENANTS, TenantMetrics } from "../../lib/server/audit/tenant-metrics.js";
import { TENANT_SERIES_IDLE_MS } from "../../lib/server/durations.js";

/** The kgw_tenant_* lines of a scrape, as "name{labels} value". */
async function scrape(m: ServerMetrics): Promise<string[]> {
  const text = await m.registry.metrics();
  return text.split("\n").filter((l) => l.startsWith("kgw_tenant_"));
}

/** Tenants that appear as a label anywhere in a scrape. */
async function labelled(m: ServerMetrics): Promise<string[]> {
  const names = new Set<string>();
  for (const line of await scrape(m)) {
    const match = /tenant="([^"]*)"/.exec(line);
    if (match) names.add(match[1]!);
  }
  return [...names].sort();
}

function setup(limit: number) {
  let now = 1_000_000;
  const metrics = new ServerMetrics();
  const tenants = new TenantMetrics(metrics, limit, () => now);
  return { metrics, tenants, advance: (ms: number) => (now += ms) };
}

describe("per-tenant metrics", () => {
  it("count dials by outcome, bytes each way, open tunnels and agents", async () => {
    const { metrics, tenants } = setup(10);
    tenants.agentsChanged("acme", 2);
    const series = tenants.dialStarted("acme");
    series.tunnelsOpen++;
    series.toAgent += 100;
    series.toClient += 7000;
    const lines = await scrape(metrics);
    expect(lines).toContain('kgw_tenant_agents{tenant="acme"} 2');
    expect(lines).toContain('kgw_tenant_tunnels_open{tenant="acme"} 1');
    expect(lines).toContain('kgw_tenant_bytes_total{tenant="acme",direction="to_agent"} 100');
    expect(lines).toContain('kgw_tenant_bytes_total{tenant="acme",direction="to_client"} 7000');
    series.tunnelsOpen--;
    series.toClient += 1;
    tenants.dialEnded("acme", "ok");
    const after = await scrape(metrics);
    expect(after).toContain('kgw_tenant_dials_total{tenant="acme",outcome="ok"} 1');
    expect(after).toContain('kgw_tenant_tunnels_open{tenant="acme"} 0');
    expect(after).toContain('kgw_tenant_bytes_total{tenant="acme",direction="to_client"} 7001');
  });

  it("label at most `limit` tenants; the rest are counted together as _other", async () => {
    const { metrics, tenants } = setup(2);
    for (const t of ["a", "b", "c", "d"]) {
      tenants.dialStarted(t);
      tenants.dialEnded(t, "unavailable");
    }
    tenants.agentsChanged("e", 1);
    expect(await labelled(metrics)).toEqual([OTHER_TENANTS, "a", "b"].sort());
    const lines = await scrape(metrics);
    expect(lines).toContain(`kgw_tenant_dials_total{tenant="${OTHER_TENANTS}",outcome="unavailable"} 2`);
    expect(lines).toContain(`kgw_tenant_agents{tenant="${OTHER_TENANTS}"} 1`);
    expect(tenants.labels).toHaveLength(3);
  });

  it("with a limit of 0, every tenant is _other", async () => {
    const { metrics, tenants } = setup(0);
    tenants.agentsChanged("acme", 1);
    tenants.dialStarted("globex");
    expect(await labelled(metrics)).toEqual([OTHER_TENANTS]);
  });

  it("a tenant's label does not change while it is active, even when a place frees up", async () => {
    const { metrics, tenants, advance } = setup(1);
    tenants.agentsChanged("a", 1);
    tenants.agentsChanged("b", 1); // b is _other
    tenants.agentsChanged("a", 0);
    advance(TENANT_SERIES_IDLE_MS + 1);
    await scrape(metrics); // a's series are dropped; its place is free
    tenants.agentsChanged("b", 2);
    const lines = await scrape(metrics);
    expect(lines).toContain(`kgw_tenant_agents{tenant="${OTHER_TENANTS}"} 2`);
    expect(await labelled(metrics)).toEqual([OTHER_TENANTS]);
    // Once b has been idle and comes back, it takes the free place.
    tenants.agentsChanged("b", 0);
    tenants.agentsChanged("b", 1);
    expect(await scrape(metrics)).toContain('kgw_tenant_agents{tenant="b"} 1');
  });

  it("drop an idle tenant's series after the idle period, and keep them before", async () => {
    const { metrics, tenants, advance } = setup(5);
    tenants.agentsChanged("acme", 1);
    tenants.dialStarted("acme");
    tenants.dialEnded("acme", "ok");
    tenants.agentsChanged("acme", 0); // deleted, or its agents moved to another instance
    advance(TENANT_SERIES_IDLE_MS - 1);
    expect(await labelled(metrics)).toEqual(["acme"]);
    advance(2);
    expect(await labelled(metrics)).toEqual([]);
    expect(tenants.labels).toEqual([]);
  });

  it("free an idle tenant's place for a new tenant when the limit is reached", async () => {
    const { metrics, tenants, advance } = setup(1);
    tenants.dialStarted("old");
    tenants.dialEnded("old", "ok");
    advance(TENANT_SERIES_IDLE_MS + 1);
    tenants.dialStarted("new");
    tenants.dialEnded("new", "ok");
    expect(await labelled(metrics)).toEqual(["new"]);
  });

  it("keep a tenant with a dial in flight, however long it lasts", async () => {
    const { metrics, tenants, advance } = setup(5);
    tenants.dialStarted("acme");
    advance(10 * TENANT_SERIES_IDLE_MS);
    expect(await labelled(metrics)).toEqual(["acme"]);
  });
});
