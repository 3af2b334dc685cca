/**
 * Where audit records go: injected into the gateway (GatewayDeps.audit), so a fleet can add
 * fields of its own and tests can capture records. `openAuditLog` (audit-log.ts) is the
 * implementation `kgw server` uses: a pino destination of its own, apart from the server log.
 */
import type { DialAuditRecord } from "./audit-record.js";

export interface AuditSink {
  /**
   * One record per dial, called on the event loop as the dial ends, from inside the data path:
   * it must not block or throw. Buffer, drop and count instead.
   */
  write(record: DialAuditRecord): void;
  /** Flushes what is buffered and releases the destination; the gateway calls it last. */
  close?(): Promise<void>;
}

/** No audit (--audit-log not given): records are dropped where they are made. */
export const discardAudit: AuditSink = { write: () => {} };
