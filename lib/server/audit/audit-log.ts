/**
 * The audit sink `kgw server --audit-log` writes to: one JSON line per dial on a pino destination
 * of its own (a SonicBoom), never the server log's, so the audit trail can be kept, shipped and
 * rotated on its own terms. A file is appended to, created 0600, and reopened on SIGHUP for log
 * rotation; `-` is stdout, shared with the server log (audit-record.ts: why lines stay whole).
 *
 * Writing never blocks or throws into the data path: records are buffered up to
 * AUDIT_BUFFER_BYTES while the destination is slow, then dropped and counted.
 */
import { statSync } from "node:fs";
import { pino } from "pino";
import { ConfigError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { AUDIT_CLOSE_TIMEOUT_MS, AUDIT_ERROR_LOG_INTERVAL_MS } from "../durations.js";
import { AUDIT_RECORD_MAX_BYTES, type DialAuditRecord } from "./audit-record.js";
import type { AuditSink } from "./audit-sink.js";

/** `--audit-log=-`: stdout, as kube-apiserver spells it for --audit-log-path. */
export const AUDIT_STDOUT = "-";

/**
 * Bytes of records buffered while the destination is slower than the dials end: about 40,000
 * records of ~400 bytes, 40 s of 1,000 dials a second behind a stalled disk. Past it
 * records are dropped and counted (kgw_server_audit_dropped_records_total) instead of memory
 * growing without bound.
 */
export const AUDIT_BUFFER_BYTES = 16 * 1024 * 1024;

/** Records name tenants, callers and destinations: for the server's user only. */
export const AUDIT_FILE_MODE = 0o600;

export interface AuditLog extends AuditSink {
  /** Opens the file again by its name (after rotation moved it); a no-op on stdout. */
  reopen(): void;
  close(): Promise<void>;
}

export interface AuditLogDeps {
  log: Logger;
  metrics: ServerMetrics;
}

/** Opens `target` (a path, or `-` for stdout); a file that cannot be opened is a ConfigError. */
export async function openAuditLog(target: string, deps: AuditLogDeps): Promise<AuditLog> {
  const log = deps.log.child({ component: "audit" });
  const toStdout = target === AUDIT_STDOUT;
  const dest = pino.destination(
    toStdout
      ? // One write holds whole records and at most PIPE_BUF bytes: atomic on a pipe, so the
        // server log's lines and ours never cut into each other.
        { dest: 1, sync: false, maxWrite: AUDIT_RECORD_MAX_BYTES, maxLength: AUDIT_BUFFER_BYTES }
      : { dest: target, sync: false, append: true, mode: AUDIT_FILE_MODE, maxLength: AUDIT_BUFFER_BYTES },
  );
  try {
    await new Promise<void>((resolve, reject) => {
      dest.once("ready", resolve);
      dest.once("error", reject);
    });
  } catch (err) {
    throw new ConfigError(`--audit-log ${target}: ${(err as Error).message}`, { cause: err });
  }
  if (!toStdout) warnIfShared(target, log);

  let lastErrorLog = Number.NEGATIVE_INFINITY;
  dest.on("error", (err: Error) => {
    deps.metrics.auditWriteErrors.inc();
    const now = Date.now();
    if (now - lastErrorLog < AUDIT_ERROR_LOG_INTERVAL_MS) return;
    lastErrorLog = now;
    log.error(
      { err: err.message, target },
      "cannot write the audit log; records are kept in memory up to a bound",
    );
  });
  dest.on("drop", () => deps.metrics.auditDroppedRecords.inc());

  let closing: Promise<void> | null = null;
  // A reopen runs once the write under way is done, and SonicBoom drops an end() that comes
  // between (nothing is written or closed after it): close waits for the reopen first.
  let reopening = false;
  dest.on("ready", () => {
    reopening = false;
  });
  return {
    write: (record: DialAuditRecord) => {
      if (closing) return; // a tunnel that ended after the gateway closed: nowhere to write
      dest.write(`${JSON.stringify(record)}\n`);
    },
    reopen: () => {
      if (toStdout || closing) return;
      reopening = true;
      dest.reopen();
      log.info({ target }, "audit log reopened");
    },
    close: () => {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          log.warn({ target }, "audit log not flushed in time; records still buffered are lost");
          dest.destroy();
          resolve();
        }, AUDIT_CLOSE_TIMEOUT_MS);
        dest.once("close", () => {
          clearTimeout(timer);
          resolve();
        });
        if (reopening) dest.once("ready", () => dest.end());
        else dest.end();
      });
      return closing;
    },
  };
}

/** The mode is set only when we create the file; an existing one keeps its own. Say so if loose. */
function warnIfShared(path: string, log: Logger): void {
  try {
    const mode = statSync(path).mode & 0o777;
    if (mode & 0o077) {
      log.warn(
        { target: path, mode: mode.toString(8) },
        "the audit log is readable by users other than the server's (it was created with this mode before)",
      );
    }
  } catch {
    // Moved away between open and stat: nothing to say about a file we no longer name.
  }
}
