import { describe, expect, it } from "vitest";
import { DialFailedError, NoAgentError } from "../../lib/errors.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import type { DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import { DialTracker, forwardedDial } from "../../lib/server/audit/dial-tracker.js";
import { TenantMetrics } from "../../lib/server/audit/tenant-metrics.js";
import type { DialContext } from "../../lib/server/core/dial-context.js";
import type { BackendLink, FrontendEnd } from "../../lib/tunnel/endpoints.js";

const ctx: DialContext = {
  caller: { tenant: "acme", principal: "cert:kube-apiserver#0a1b", listener: "gateway" },
  frontend: "grpc",
};

function setup() {
  const records: DialAuditRecord[] = [];
  const metrics = new ServerMetrics();
  const tenants = new TenantMetrics(metrics, 10);
  const tracker = new DialTracker(
    ctx,
    { protocol: "tcp", address: "10.0.0.7:443" },
    { sink: { write: (r) => records.push(r) }, tenants, instance: "gw-1" },
  );
  /** What reached the caller's own end, to check the wrappers pass everything on. */
  const seen: string[] = [];
  const end: FrontendEnd = {
    established: () => seen.push("established"),
    dialFailed: (err) => seen.push(`dialFailed ${err.code}`),
    deliver: (data) => {
      seen.push(`deliver ${data.byteLength}`);
      return true;
    },
    onceWritable: (cb) => cb(),
    closed: (err) => seen.push(`closed ${err?.code ?? "ok"}`),
  };
  const sent: number[] = [];
  const link: BackendLink = {
    send: (data) => {
      sent.push(data.byteLength);
      return true;
    },
    onceWritable: (cb) => cb(),
    close: () => sent.push(-1),
  };
  let cancelled = 0;
  const handle = tracker.handle({ cancel: () => cancelled++ });
  return { records, metrics, tracker, end, link, seen, sent, handle, cancelled: () => cancelled };
}

/** Runs `established` on the wrapped end and returns the link the caller got. */
function establish(s: ReturnType<typeof setup>): { frontend: FrontendEnd; link: BackendLink } {
  let got: BackendLink | undefined;
  const frontend = s.tracker.frontend({ ...s.end, established: (l) => (got = l) });
  frontend.established(s.link);
  return { frontend, link: got! };
}

describe("following a dial to its audit record", () => {
  it("counts the bytes each way and writes one record when the backend closes", () => {
    const s = setup();
    s.tracker.routed("acme-agent");
    const { frontend, link } = establish(s);
    link.send(new Uint8Array(10));
    link.send(new Uint8Array(5));
    frontend.deliver(new Uint8Array(1000));
    expect(s.records).toHaveLength(0); // not before the tunnel ends
    frontend.closed();
    frontend.closed(); // a second end changes nothing
    expect(s.sent).toEqual([10, 5]);
    expect(s.records).toHaveLength(1);
    expect(s.records[0]).toMatchObject({
      tenant: "acme",
      principal: "cert:kube-apiserver#0a1b",
      listener: "gateway",
      frontend: "grpc",
      instance: "gw-1",
      agentId: "acme-agent",
      destination: "10.0.0.7:443",
      outcome: "ok",
      code: null,
      bytesFromCaller: 15,
      bytesToCaller: 1000,
    });
    expect(s.records[0]!.durationMs).toBeGreaterThanOrEqual(s.records[0]!.dialMs);
  });

  it("records a caller's close as ok", () => {
    const s = setup();
    establish(s).link.close();
    expect(s.sent).toEqual([-1]);
    expect(s.records.map((r) => r.outcome)).toEqual(["ok"]);
  });

  it("records a tunnel that broke as broken, with the code", () => {
    const s = setup();
    establish(s).frontend.closed(new DialFailedError("backend reset"));
    expect(s.records[0]).toMatchObject({ outcome: "broken", code: "ERR_DIAL_FAILED" });
    expect(s.seen).toContain("closed ERR_DIAL_FAILED");
  });

  it("records an agent's dial error by its code", () => {
    const s = setup();
    s.tracker.routed("acme-agent");
    s.tracker.frontend(s.end).dialFailed(new DialFailedError("connect ECONNREFUSED"));
    expect(s.records[0]).toMatchObject({
      outcome: "refused",
      code: "ERR_DIAL_FAILED",
      agentId: "acme-agent",
    });
    expect(s.seen).toEqual(["dialFailed ERR_DIAL_FAILED"]);
  });

  it("records a dial refused before it was sent, without an agent", () => {
    const s = setup();
    s.tracker.failed(new NoAgentError());
    expect(s.records[0]).toMatchObject({ outcome: "unavailable", code: "ERR_NO_AGENT", agentId: null });
  });

  it("records a cancel while the dial is pending, and not one after it was established", () => {
    const s = setup();
    s.handle.cancel();
    expect(s.cancelled()).toBe(1);
    expect(s.records[0]).toMatchObject({ outcome: "cancelled", code: "ERR_DIAL_CANCELLED" });
    const t = setup();
    const { frontend } = establish(t);
    t.handle.cancel();
    frontend.closed();
    expect(t.records.map((r) => r.outcome)).toEqual(["ok"]);
  });

  it("keeps the tenant's open tunnels and dials in its metrics", async () => {
    const s = setup();
    const { frontend } = establish(s);
    frontend.deliver(new Uint8Array(3));
    expect(await s.metrics.registry.metrics()).toContain('kgw_tenant_tunnels_open{tenant="acme"} 1');
    frontend.closed();
    const text = await s.metrics.registry.metrics();
    expect(text).toContain('kgw_tenant_tunnels_open{tenant="acme"} 0');
    expect(text).toContain('kgw_tenant_dials_total{tenant="acme",outcome="ok"} 1');
    expect(text).toContain('kgw_tenant_bytes_total{tenant="acme",direction="to_client"} 3');
  });
});

describe("a dial that crosses a peer hop", () => {
  it("is recorded where it arrived, with its id, the owner and the agent the owner named", () => {
    const s = setup();
    const dialId = s.tracker.context.dialId!;
    expect(dialId).toMatch(/^[0-9a-f-]{36}$/);
    s.tracker.forwarded?.("gw-2"); // the peer call opened
    s.tracker.routed("acme-agent", "gw-2"); // the owner's DIAL_RSP named its agent
    const { frontend } = establish(s);
    frontend.closed();
    expect(s.records[0]).toMatchObject({ dialId, instance: "gw-1", owner: "gw-2", agentId: "acme-agent" });
  });

  it("names the last owner tried, and no agent, when none answered; its own agent makes it the owner", () => {
    const s = setup();
    s.tracker.forwarded?.("gw-2");
    s.tracker.frontend(s.end).dialFailed(new NoAgentError("no agent"));
    expect(s.records[0]).toMatchObject({ owner: "gw-2", agentId: null, outcome: "unavailable" });
    const local = setup();
    local.tracker.routed("acme-agent");
    local.tracker.frontend(local.end).dialFailed(new DialFailedError("refused"));
    expect(local.records[0]).toMatchObject({ instance: "gw-1", owner: "gw-1", agentId: "acme-agent" });
  });

  it("is neither recorded nor counted at the owner: the origin does both", () => {
    const forwarded = forwardedDial({ ...ctx, origin: "gw-0", dialId: "d" });
    const end = setup().end;
    expect(forwarded.frontend(end)).toBe(end);
    expect(forwarded.context).toMatchObject({ origin: "gw-0", dialId: "d" });
  });
});
