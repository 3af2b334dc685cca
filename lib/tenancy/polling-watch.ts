/**
 * A TenantWatch that re-lists the store every interval and keeps the newest snapshot of each
 * tenant. Any store can use it; the file store does (its `list` re-reads only files that
 * changed), and DynamoDB may, or may replace it with a change feed behind the same interface.
 *
 * Two rules make it safe to serve from:
 * - A snapshot is only ever replaced by a higher version: a lagging read (an eventually
 *   consistent Scan) cannot bring back a revoked credential.
 * - A failed poll or an unreadable record changes nothing: the last known records stay in use
 *   and the failure is reported, so a store outage never logs everyone out.
 */
import { EventEmitter } from "node:events";
import { DEFAULT_WATCH_INTERVAL_MS } from "./limits.js";
import type { TenantRecord } from "./model.js";
import type { TenantChanges, TenantListing, TenantWatch, WatchOptions } from "./store.js";

export class PollingTenantWatch extends EventEmitter implements TenantWatch {
  readonly ready: Promise<void>;
  private readonly records = new Map<string, TenantRecord>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly list: () => Promise<TenantListing>,
    options: WatchOptions = {},
  ) {
    super();
    const intervalMs = options.intervalMs ?? DEFAULT_WATCH_INTERVAL_MS;
    if (!Number.isFinite(intervalMs) || intervalMs <= 0) {
      throw new RangeError(`watch interval must be positive, got ${intervalMs}`);
    }
    const tick = () => {
      if (this.closed) return;
      // setTimeout after each poll, not setInterval: a slow read never overlaps the next one.
      // A poll's read failures are "error" events already; what is left (a "change" listener
      // that threw) is reported too, and the watch goes on.
      this.timer = setTimeout(
        () =>
          void this.poll(false).then(tick, (err: unknown) => {
            this.report(err);
            tick();
          }),
        intervalMs,
      );
    };
    this.ready = this.poll(true);
    // A failed first read is the owner's to handle through `ready`, and ends the watch: a
    // server that could not read its tenants once should not start.
    this.ready.then(tick, () => {});
  }

  get(id: string): TenantRecord | undefined {
    return this.records.get(id);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
  }

  /** An "error" event with no listener would throw from the timer; reporting is best effort. */
  private report(err: unknown): void {
    if (this.listenerCount("error") > 0) this.emit("error", err);
  }

  private async poll(first: boolean): Promise<void> {
    let listing: TenantListing;
    try {
      listing = await this.list();
    } catch (err) {
      if (first) throw err;
      if (!this.closed) this.report(err);
      return;
    }
    if (this.closed) return;
    const changed: TenantRecord[] = [];
    const seen = new Set<string>();
    for (const record of listing.tenants) {
      seen.add(record.id);
      const known = this.records.get(record.id);
      if (!known || record.version > known.version) {
        this.records.set(record.id, record);
        changed.push(record);
      }
    }
    // An unreadable record still exists: keep what we knew of it rather than treat it as gone.
    const unreadableIds = new Set(listing.unreadable.map((e) => e.tenantId));
    for (const err of listing.unreadable) this.report(err);
    const removed: string[] = [];
    for (const id of this.records.keys()) {
      if (!seen.has(id) && !unreadableIds.has(id)) removed.push(id);
    }
    for (const id of removed) this.records.delete(id);
    if (changed.length > 0 || removed.length > 0) {
      const changes: TenantChanges = { changed, removed };
      this.emit("change", changes);
    }
  }
}
