/**
 * What the fleet's background work tells the operator: every failure and every repair of the
 * lease keeper, the ownership writer and the sweeper is logged (with the tenant and agent where
 * there is one) and counted. Failures that repeat while the registry is down (one per write, per
 * heartbeat, per sweep) are logged within a budget; the metrics see every one.
 */
import type { FleetMetrics } from "../metrics/fleet-metrics.js";
import { budgetedWarn } from "../observability/log-budget.js";
import type { Logger } from "../observability/logger.js";
import type { LeaseKeeper } from "../registry/lease-keeper.js";
import type { OwnershipWriter } from "../registry/ownership-writer.js";
import type { Sweeper } from "../registry/sweeper.js";

/**
 * Lines a second of each kind of registry failure: enough to see which tenants and agents an
 * outage touched, few enough that 10,000 agents leaving during one do not flood the log.
 */
const FAILURE_LINES_PER_SECOND = 5;

/** Dead instances named in one sweep's log line; the count says how many there were. */
const SWEPT_IDS_LOGGED = 20;

export interface KeeperReportsOptions {
  keeper: LeaseKeeper;
  writer: OwnershipWriter;
  sweeper: Sweeper;
  log: Logger;
  metrics: FleetMetrics;
}

export function reportKeepers({ keeper, writer, sweeper, log, metrics }: KeeperReportsOptions): void {
  keeper.on("failure", (err) => {
    metrics.registryErrors.inc({ call: "heartbeat" });
    log.warn({ err: err.message }, "lease heartbeat failed; serving on what is known");
  });
  keeper.on("lost", (err) => {
    // Another process took over our id: it owns our rows now. Stop claiming, keep serving
    // what is open; the operator must look (two processes with one --server-id).
    log.error({ err: err.message }, "lease lost to a newer incarnation of this instance id");
  });

  const writeFailed = budgetedWarn(log, FAILURE_LINES_PER_SECOND);
  writer.on("failure", (err, write) => {
    metrics.registryErrors.inc({ call: "ownership" });
    writeFailed(
      { tenant: write.tenant, agentId: write.agentId, write: write.kind, err: err.message },
      "ownership row write failed; retrying with backoff",
    );
  });
  writer.on("recovered", (failures) => {
    log.info({ failures }, "ownership row writes succeed again");
  });
  const dropped = budgetedWarn(log, FAILURE_LINES_PER_SECOND);
  writer.on("dropped", (row) => {
    metrics.droppedReleases.inc();
    dropped(
      { tenant: row.tenant, agentId: row.agentId },
      "pending ownership row deletion dropped past its bound; the resync after the outage deletes the row",
    );
  });
  const superseded = budgetedWarn(log, FAILURE_LINES_PER_SECOND);
  writer.on("superseded", (row) => {
    metrics.supersededClaims.inc();
    superseded(
      { tenant: row.tenant, agentId: row.agentId },
      "ownership row not claimed: a newer incarnation of this instance id holds it",
    );
  });

  const sweepFailed = budgetedWarn(log, FAILURE_LINES_PER_SECOND);
  sweeper.on("failure", (err) => {
    metrics.registryErrors.inc({ call: "sweep" });
    sweepFailed({ err: err.message }, "sweep of dead instances failed; the next one tries again");
  });
  sweeper.on("swept", (report) => {
    if (report.rows > 0) metrics.swept.inc({ item: "rows" }, report.rows);
    if (report.instances.length > 0) metrics.swept.inc({ item: "instances" }, report.instances.length);
    if (report.instances.length > 0 || report.rows > 0) {
      log.info(
        {
          instances: report.instances.slice(0, SWEPT_IDS_LOGGED),
          instanceCount: report.instances.length,
          rows: report.rows,
        },
        "swept dead instances' leases and ownership rows",
      );
    }
    if (report.unreadable.length > 0) {
      sweepFailed(
        { unreadable: report.unreadable.length, err: report.unreadable[0]?.message },
        "sweep skipped registry items it could not read",
      );
    }
  });
}
