import { readFileSync } from "node:fs";
import { Writable } from "node:stream";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../cdk/lib/constructs/gateway-service.js";
import { EmfPublisher } from "../../lib/metrics/emf/emf-publisher.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { createLogger, silentLogger } from "../../lib/observability/logger.js";
import { buildDialRecord } from "../../lib/server/audit/audit-record.js";
import { confSections, confValues, fluentBitTime, routeLine, routerParser } from "../helpers/log-router.js";

const dockerfile = readFileSync(`${REPO_ROOT}/cdk/log-router/Dockerfile`, "utf8");

/** Lines as the gateway writes them: its logger, an audit record, a metrics document. */
async function gatewayLines(): Promise<{ log: string[]; audit: string; metrics: string[] }> {
  const log: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      log.push(...chunk.toString().split("\n").filter(Boolean));
      done();
    },
  });
  const logger = createLogger({ name: "kgw-server", level: "info", destination: sink });
  logger.info({ port: 8132 }, "listening");
  logger.warn({ tenant: "acme", credentialId: "token:abc" }, "dial refused");
  const audit = JSON.stringify(
    buildDialRecord({
      endedAt: Date.now(),
      dialId: "d-1",
      caller: { tenant: "acme", principal: "token:abc", listener: "gateway" },
      frontend: "connect",
      instance: "gw-1",
      owner: null,
      agentId: null,
      destination: "10.0.0.1:10250",
      outcome: "unavailable",
      code: "ERR_NO_AGENT",
      bytesFromCaller: 0,
      bytesToCaller: 0,
      dialMs: 1,
      durationMs: 1,
    }),
  );
  const metrics: string[] = [];
  const m = new ServerMetrics();
  m.tenantDials.inc({ tenant: "acme", outcome: "unavailable" });
  await new EmfPublisher({ namespace: "kgw", fleet: "t", instance: "gw-1" }, 60_000, {
    registry: m.registry,
    write: (l) => metrics.push(l),
    now: Date.now,
    schedule: () => ({ cancel: () => {} }),
    log: silentLogger(),
    onError: () => {},
  }).publish();
  return { log, audit, metrics };
}

describe("the FireLens log router's configuration", () => {
  it("reads the gateway's ISO 8601 times with its own parser, to the millisecond", async () => {
    const parser = routerParser("kgw_json");
    expect(parser).toEqual({
      format: "json",
      timeKey: "time",
      timeFormat: "%Y-%m-%dT%H:%M:%S.%L%z",
      timeKeep: true,
    });
    const { log, audit } = await gatewayLines();
    for (const line of [...log, audit]) {
      const time = JSON.parse(line).time as string;
      expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(fluentBitTime(time, parser.timeFormat)).toBe(Date.parse(time));
    }
    // Offsets other than Z are read as Fluent Bit reads them.
    expect(fluentBitTime("2026-12-05T23:55:22.123+02:00", parser.timeFormat)).toBe(
      Date.parse("2026-12-05T21:55:22.123Z"),
    );
  });

  it("no longer uses the stock json parser, whose Apache time format rejects every gateway line", async () => {
    const { log } = await gatewayLines();
    // aws-for-fluent-bit's /fluent-bit/parsers/parsers.conf: [PARSER] json, Time_Format below.
    expect(fluentBitTime(JSON.parse(log[0]!).time, "%d/%b/%Y:%H:%M:%S %z")).toBeNull();
    const filter = confSections("kgw.conf").find((s) => confValues(s, "Name")[0] === "parser")!;
    expect(confValues(filter, "Parser")).toEqual(["kgw_json"]);
  });

  it("routes log lines to ops, metrics documents to the EMF group, audit records to the audit group", async () => {
    const { log, audit, metrics } = await gatewayLines();
    expect(metrics.length).toBeGreaterThan(0);
    for (const line of log) {
      const routed = routeLine(line);
      expect(routed.logGroup).toBe(`\${KGW_OPS_LOG_GROUP}`);
      // Kept as the gateway wrote it, stamped with its own time.
      expect(routed.record.time).toBe(JSON.parse(line).time);
      expect(routed.time).toBe(Date.parse(JSON.parse(line).time));
    }
    expect(routeLine("node: something went wrong", "stderr").logGroup).toBe(`\${KGW_OPS_LOG_GROUP}`);
    expect(routeLine(audit).logGroup).toBe(`\${KGW_AUDIT_LOG_GROUP}`);
    for (const line of metrics) expect(routeLine(line).logGroup).toBe(`\${KGW_METRICS_LOG_GROUP}`);
  });

  it("writes each stream to the log group the task definition names, creating none; metrics as json/emf", () => {
    const outputs = confSections("kgw.conf").filter((s) => s.name === "OUTPUT");
    expect(outputs.map((o) => confValues(o, "log_group_name")[0])).toEqual([
      `\${KGW_OPS_LOG_GROUP}`,
      `\${KGW_METRICS_LOG_GROUP}`,
      `\${KGW_AUDIT_LOG_GROUP}`,
    ]);
    for (const o of outputs) {
      expect(confValues(o, "Name")).toEqual(["cloudwatch_logs"]);
      expect(confValues(o, "auto_create_group")).toEqual(["false"]);
    }
    expect(outputs.map((o) => confValues(o, "log_format"))).toEqual([[], ["json/emf"], []]);
  });

  it("is baked, with its parsers, into a pinned AWS for Fluent Bit image", () => {
    expect(dockerfile).toMatch(
      /^FROM public\.ecr\.aws\/aws-observability\/aws-for-fluent-bit:\d+\.\d+\.\d+/m,
    );
    expect(dockerfile).toContain("COPY kgw.conf kgw-parsers.conf /fluent-bit/etc/");
    const service = confSections("kgw.conf").find((s) => s.name === "SERVICE")!;
    expect(confValues(service, "Parsers_File")).toEqual(["/fluent-bit/etc/kgw-parsers.conf"]);
  });
});
