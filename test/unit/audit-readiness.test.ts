import { describe, expect, it } from "vitest";
import { adminReadinessRoutes, healthRoutes, type ReadinessState } from "../../lib/server/health-routes.js";
import type { HttpReply } from "../../lib/transport/http-endpoints.js";

function state(agents: Record<string, boolean[]>, accepting = true): ReadinessState {
  return {
    accepting: () => accepting,
    responsiveAgents: () => Object.values(agents).flat().filter(Boolean).length,
    agentsOf: (tenant) => (agents[tenant] ?? []).map((responsive) => ({ responsive })),
  };
}

function get(routes: ReturnType<typeof healthRoutes>, pathAndQuery: string): HttpReply {
  const [p, q = ""] = pathAndQuery.split("?");
  return routes[p!]!({ query: new URLSearchParams(q), path: p! }) as HttpReply;
}

describe("readiness per tenant, on the admin port", () => {
  const admin = adminReadinessRoutes(state({ acme: [true, false], globex: [false] }));

  it("is 200 when the tenant has an agent connected and answering here", () => {
    expect(get(admin, "/readyz?tenant=acme")).toEqual({
      status: 200,
      body: "tenant acme: ready: 1 agent connected and answering\n",
    });
  });

  it("is 503 with the reason otherwise", () => {
    expect(get(admin, "/readyz?tenant=globex")).toEqual({
      status: 503,
      body: "tenant globex: not ready: 1 agent connected, none answering\n",
    });
    expect(get(admin, "/readyz?tenant=initech")).toEqual({
      status: 503,
      body: "tenant initech: not ready: no agent connected to this instance\n",
    });
    expect(get(adminReadinessRoutes(state({ acme: [true] }, false)), "/readyz?tenant=acme").status).toBe(503);
  });

  it.each([
    "tenant=",
    "tenant=Acme",
    "tenant=-acme",
    "tenant=a_b",
    "tenant=..%2Fetc",
    `tenant=${"a".repeat(64)}`,
    "tenant=%1b%5b31m",
    "tenant=acme&tenant=globex",
  ])("is 400 for a malformed tenant (%s), which is never echoed", (q) => {
    const r = get(admin, `/readyz?${q}`);
    expect(r.status).toBe(400);
    expect(r.body).toBe("tenant must be given once, as a tenant id (a DNS label)\n");
  });

  it("takes the drop-in's tenant, default", () => {
    expect(get(adminReadinessRoutes(state({ default: [true] })), "/readyz?tenant=default").status).toBe(200);
  });

  it("answers for the whole instance without a tenant", () => {
    expect(get(admin, "/readyz")).toEqual({ status: 200, body: "ok\n" });
  });
});

describe("the health port", () => {
  it("keeps /readyz and /healthz as they were", () => {
    expect(get(healthRoutes(state({ acme: [true] })), "/readyz")).toEqual({ status: 200, body: "ok\n" });
    expect(get(healthRoutes(state({})), "/readyz")).toEqual({
      status: 503,
      body: "no agent connected and answering\n",
    });
    expect(get(healthRoutes(state({}, false)), "/readyz").body).toBe("shutting down\n");
    expect(get(healthRoutes(state({})), "/healthz").status).toBe(200);
  });

  it("does not answer for a tenant: it may face the public", () => {
    const r = get(healthRoutes(state({ acme: [true] })), "/readyz?tenant=acme");
    expect(r.status).toBe(404);
    expect(r.body).not.toContain("acme");
  });
});
