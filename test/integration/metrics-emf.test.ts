/**
 * A real `kgw server` with --metrics-emf-interval and --audit-log=-, as the AWS task runs it:
 * everything it writes on stdout is whole JSON lines, its metrics documents are valid EMF with
 * what it counted, and the log router's rules send each line where it belongs, stamped with the
 * line's own time.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/agent.js";
import { connectThrough } from "../helpers/connect-client.js";
import { emfProblems } from "../helpers/emf-spec.js";
import { metricAt } from "../helpers/endpoints.js";
import { gatewayFlags } from "../helpers/gateway.js";
import { spawnKgwAnnouncing } from "../helpers/kgw-process.js";
import { routeLine } from "../helpers/log-router.js";
import { getTestPki } from "../helpers/pki.js";
import { activeResources as resources } from "../helpers/resources.js";

let baseline: Map<string, number>;
beforeAll(async () => {
  await getTestPki();
  baseline = resources();
});
afterAll(async () => {
  await waitFor(
    () => [...resources()].every(([k, n]) => n <= (baseline.get(k) ?? 0)),
    5000,
    "no leaked handles",
  );
});

describe("kgw server --metrics-emf-interval", () => {
  it("writes valid EMF beside its logs and audit records, and the log router routes each line", async () => {
    const pki = await getTestPki();
    const server = spawnKgwAnnouncing([
      "server",
      ...gatewayFlags(pki),
      "--server-id=emf-gw",
      "--metrics-emf-interval=10m",
      "--audit-log=-",
    ]);
    const ports = await server.ports();
    // A dial with no agent to take it: one audit record, one failed dial counted.
    const answer = await connectThrough(
      { kind: "tls", host: "127.0.0.1", port: ports.frontend!, pki },
      "10.0.0.1:10250",
    );
    answer.socket.destroy();
    expect(answer.status).toBe(503);
    await expect
      .poll(
        () =>
          metricAt(`127.0.0.1:${ports.admin}`, "kgw_tenant_dials_total", {
            tenant: "default",
            outcome: "unavailable",
          }),
        {
          timeout: 10_000,
        },
      )
      .toBe(1);
    // The interval is long: the set the test reads is the one written at shutdown.
    server.child.kill("SIGTERM");
    expect(await server.exited).toEqual({ code: 0, signal: null });

    const lines = server.stdout.join("").split("\n").filter(Boolean);
    const routed = lines.map((line) => ({ line, ...routeLine(line) }));
    for (const r of routed) expect(() => JSON.parse(r.line), r.line).not.toThrow();

    const ops = routed.filter((r) => r.logGroup === `\${KGW_OPS_LOG_GROUP}`);
    const audit = routed.filter((r) => r.logGroup === `\${KGW_AUDIT_LOG_GROUP}`);
    const metrics = routed.filter((r) => r.logGroup === `\${KGW_METRICS_LOG_GROUP}`);
    expect(ops.length).toBeGreaterThan(0);
    expect(audit).toHaveLength(1);
    expect(metrics.length).toBeGreaterThan(0);
    for (const r of [...ops, ...audit]) {
      // The router reads each line's own time, to the millisecond.
      expect(r.time, r.line).toBe(Date.parse(JSON.parse(r.line).time));
    }

    for (const r of metrics) expect(emfProblems(r.line), r.line).toEqual([]);
    const docs = metrics.map((r) => JSON.parse(r.line) as Record<string, unknown>);
    const instance = docs.find((d) => d.Instance === "emf-gw")!;
    expect(instance).toMatchObject({ Fleet: "standalone", Dials: 1, FailedDials: 1 });
    expect(docs.find((d) => d.Outcome === "unavailable")).toMatchObject({ Fleet: "standalone", Dials: 1 });
  });
});
