/**
 * Writes this instance's ownership rows in the background. The server calls `claimed` and
 * `released` synchronously on agent connect and disconnect; neither waits on the registry nor
 * fails because of it, so an agent connects whether DynamoDB is up or not.
 *
 * The writer keeps two maps per (tenant, agent): the row that should be in the table (the
 * agent's current stream here) and the row it last knew to be there. Any difference marks the
 * key dirty; workers reconcile dirty keys with one conditional write each. That coalesces for
 * free: a connect, disconnect and reconnect while the registry is down is one claim when it
 * comes back, and a connect then disconnect is nothing at all.
 *
 * Bounds: pending claims are at most the agents connected (one per key). Pending deletions grow
 * only while the registry is down, one per agent that left; past MAX_PENDING_RELEASES the oldest
 * are dropped (O(1) each: they are kept in the order they became due) and counted, and `resync` (run after every outage and every time the lease is
 * regained) deletes whatever rows of ours the table still holds that no agent backs, and
 * re-claims every connected agent's row, the ones a sweeper removed while we were away included.
 */
import { EventEmitter } from "node:events";
import { Backoff } from "../util/backoff.js";
import {
  MAX_PENDING_RELEASES,
  OWNER_RETRY_BASE_MS,
  OWNER_RETRY_CAP_MS,
  OWNER_ROW_RESTAMP_MS,
  OWNER_WRITE_CONCURRENCY,
  RESTAMP_CHECK_MS,
} from "./durations.js";
import type { FleetRegistry } from "./fleet-registry.js";
import { checkCounter, checkInstanceId, checkRow } from "./keys.js";
import type { OwnerRow } from "./model.js";
import type { OwnershipWrite, OwnershipWriterState } from "./ownership-report.js";
import { PendingReleases } from "./pending-releases.js";

export type { OwnershipWrite, OwnershipWriterState } from "./ownership-report.js";

export interface OwnershipWriterOptions {
  registry: FleetRegistry;
  instanceId: string;
  /** The LeaseKeeper's incarnation: rows are fenced by it. */
  incarnation: number;
  /** ms since the epoch; Date.now by default. */
  clock?: () => number;
  random?: () => number;
  concurrency?: number;
  maxPendingReleases?: number;
  /** A row written longer ago than this is written again, to push its TTL out. */
  restampAfterMs?: number;
}

interface Known {
  row: OwnerRow;
  /** When we wrote it (ms), for TTL re-stamping; 0 when learned from a read. */
  writtenAt: number;
}

export class OwnershipWriter extends EventEmitter {
  private readonly registry: FleetRegistry;
  private readonly instanceId: string;
  private readonly incarnation: number;
  private readonly clock: () => number;
  private readonly concurrency: number;
  private readonly restampAfterMs: number;
  private readonly backoff: Backoff;

  /** Rows that should be in the table: the agents connected here now. */
  private readonly desired = new Map<string, OwnerRow>();
  /** Rows we believe the table holds for us. */
  private readonly written = new Map<string, Known>();
  /** Keys whose desired and written rows may differ, oldest first. */
  private readonly dirty = new Set<string>();
  /** Keys due a deletion (written, no longer desired): kept by `track` as the maps change. */
  private readonly releasing: PendingReleases;
  private readonly inProgress = new Set<string>();
  private nextSession = 1;
  private resyncWanted = false;
  private resyncRunning = false;
  /** While the registry fails: no writes until the backoff timer fires, and one at a time after. */
  private paused = false;
  private timer: NodeJS.Timeout | undefined;
  private restampTimer: NodeJS.Timeout | undefined;
  private closed = false;

  private droppedReleases = 0;
  private superseded = 0;
  private lastError: Error | null = null;
  private consecutiveFailures = 0;
  private failingSince: number | null = null;

  constructor(options: OwnershipWriterOptions) {
    super();
    this.registry = options.registry;
    this.instanceId = checkInstanceId(options.instanceId);
    this.incarnation = checkCounter("incarnation", options.incarnation);
    this.clock = options.clock ?? Date.now;
    this.concurrency = options.concurrency ?? OWNER_WRITE_CONCURRENCY;
    this.releasing = new PendingReleases(options.maxPendingReleases ?? MAX_PENDING_RELEASES);
    this.restampAfterMs = options.restampAfterMs ?? OWNER_ROW_RESTAMP_MS;
    this.backoff = new Backoff({
      baseMs: OWNER_RETRY_BASE_MS,
      capMs: OWNER_RETRY_CAP_MS,
      random: options.random ?? Math.random,
    });
  }

  /**
   * Agent `agentId` of `tenant` opened a stream here: returns its row (a new session) and
   * writes it in the background. Hand the row back to `released` when the stream ends.
   */
  claimed(tenant: string, agentId: string): OwnerRow {
    const row: OwnerRow = Object.freeze({
      tenant,
      agentId,
      instanceId: this.instanceId,
      incarnation: this.incarnation,
      session: this.nextSession++,
      connectedAt: this.clock(),
    });
    try {
      checkRow(row);
    } catch (err) {
      // Admission already refused such ids; if one slips through, the agent still connects and
      // is reachable from this instance, only not advertised.
      this.report(err, { kind: "invalid-row", tenant: tenant.slice(0, 64), agentId: agentId.slice(0, 64) });
      return row;
    }
    const k = keyOf(row);
    this.desired.set(k, row);
    this.track(k);
    this.mark(k);
    return row;
  }

  /** The stream of `row` ended. A row replaced by a newer session since is left alone. */
  released(row: OwnerRow): void {
    const k = keyOf(row);
    if (this.desired.get(k)?.session !== row.session) return;
    this.desired.delete(k);
    this.track(k);
    this.mark(k);
    this.boundReleases();
  }

  /**
   * Reads our rows back from the table, deletes those no agent here backs and re-claims the
   * rest. Run after an outage and whenever the lease is regained (LeaseKeeper "acquired").
   */
  resync(): void {
    this.resyncWanted = true;
    this.pump();
  }

  /** Starts the periodic TTL re-stamp (restamp() every RESTAMP_CHECK_MS). */
  start(): void {
    if (this.restampTimer || this.closed) return;
    this.restampTimer = setInterval(() => this.restamp(), RESTAMP_CHECK_MS);
    this.restampTimer.unref();
  }

  /** Re-writes rows written longer than restampAfterMs ago, pushing their TTL out. Cheap if none. */
  restamp(): void {
    const cutoff = this.clock() - this.restampAfterMs;
    for (const [k, known] of this.written) {
      if (this.desired.get(k) === known.row && known.writtenAt < cutoff) this.mark(k);
    }
  }

  state(): OwnershipWriterState {
    let pendingClaims = 0;
    for (const k of this.dirty) if (this.work(k) === "claim") pendingClaims++;
    for (const k of this.inProgress) if (!this.dirty.has(k) && this.work(k) === "claim") pendingClaims++;
    return {
      pendingClaims,
      pendingReleases: this.releasing.size,
      droppedReleases: this.droppedReleases,
      superseded: this.superseded,
      lastError: this.lastError,
      consecutiveFailures: this.consecutiveFailures,
      failingSince: this.failingSince,
    };
  }

  /** True once nothing is pending (every row written or deleted); false after `timeoutMs`. */
  async flush(timeoutMs: number): Promise<boolean> {
    if (this.idle()) return true;
    return new Promise((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.off("idle", onIdle);
        resolve(ok);
      };
      const onIdle = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.on("idle", onIdle);
    });
  }

  /** Stops writing; what is pending is left to the sweeper and TTL. */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.restampTimer);
  }

  override on(event: "idle", listener: () => void): this;
  /** A write failed (it is retried with backoff), or a row could not be written at all. */
  override on(event: "failure", listener: (err: Error, write: OwnershipWrite) => void): this;
  /** Writes succeed again after `failures` failed ones. */
  override on(event: "recovered", listener: (failures: number) => void): this;
  /** A pending deletion given up past maxPendingReleases (resync deletes the row later). */
  override on(event: "dropped", listener: (row: OwnerRow) => void): this;
  /** A claim refused because a newer incarnation of our instance id wrote the row. */
  override on(event: "superseded", listener: (row: OwnerRow) => void): this;
  override on(event: string, listener: (...args: never[]) => void): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  private idle(): boolean {
    return this.dirty.size === 0 && this.inProgress.size === 0 && !this.resyncWanted && !this.resyncRunning;
  }

  /** What key `k` needs: a claim (new, newer or stale row), a release, or nothing. */
  private work(k: string): "claim" | "release" | undefined {
    const want = this.desired.get(k);
    const have = this.written.get(k);
    if (want) {
      return have?.row !== want || have.writtenAt < this.clock() - this.restampAfterMs ? "claim" : undefined;
    }
    return have ? "release" : undefined;
  }

  private mark(k: string): void {
    // Re-inserted at the end: a key changed again waits behind the others, in order.
    this.dirty.delete(k);
    if (this.work(k)) this.dirty.add(k);
    this.pump();
  }

  /** Keeps `releasing` in step with the maps for key `k`: call after changing either. */
  private track(k: string): void {
    this.releasing.set(k, this.written.has(k) && !this.desired.has(k));
  }

  /** Drops the oldest pending deletions beyond the bound (resync finds those rows again). */
  private boundReleases(): void {
    for (const k of this.releasing.excess(this.inProgress)) {
      const row = this.written.get(k)?.row;
      this.dirty.delete(k);
      this.written.delete(k);
      this.droppedReleases++;
      if (row) this.emitSafely("dropped", row);
    }
  }

  private pump(): void {
    if (this.closed) return;
    if (this.paused) return;
    // After a failure, one request at a time probes the registry until one succeeds.
    const limit = this.consecutiveFailures > 0 ? 1 : this.concurrency;
    if (this.resyncWanted && !this.resyncRunning) {
      if (this.inProgress.size > 0) return; // resync starts once the writes in flight are done
      this.resyncWanted = false;
      this.resyncRunning = true;
      void this.runResync();
      return;
    }
    if (this.resyncRunning) return;
    for (const k of this.dirty) {
      if (this.inProgress.size >= limit) break;
      if (this.inProgress.has(k)) continue;
      this.dirty.delete(k);
      this.inProgress.add(k);
      void this.reconcile(k);
    }
    if (this.idle()) this.emit("idle");
  }

  /** Backs off after a failure: nothing is sent until the timer (real time, not the clock) fires. */
  private pause(delayMs: number): void {
    this.paused = true;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.paused = false;
      this.pump();
    }, delayMs);
  }

  private async reconcile(k: string): Promise<void> {
    const want = this.desired.get(k);
    const have = this.written.get(k);
    const work = this.work(k);
    let failed = false;
    try {
      if (work === "claim" && want) {
        const outcome = await this.registry.claim(want);
        if (outcome === "claimed") {
          this.written.set(k, { row: want, writtenAt: this.clock() });
          this.track(k);
        } else {
          // A newer incarnation of our instance id wrote this row: we are the stale process.
          // Nothing to retry (the LeaseKeeper reports the takeover as "lost"): remember the row
          // as done, never to be re-stamped; its release will be fenced off, as it should.
          this.written.set(k, { row: want, writtenAt: Number.POSITIVE_INFINITY });
          this.track(k);
          this.superseded++;
          this.emitSafely("superseded", want);
        }
      } else if (work === "release" && have) {
        await this.registry.release(have.row);
        if (this.written.get(k) === have) {
          this.written.delete(k);
          this.track(k);
        }
      }
      this.succeeded();
    } catch (err) {
      failed = true;
      const row = want ?? have?.row;
      this.failed(err, { kind: work ?? "claim", tenant: row?.tenant, agentId: row?.agentId });
    } finally {
      this.inProgress.delete(k);
    }
    // Failed, or changed again while the write was in flight: go round once more.
    if (this.work(k)) this.dirty.add(k);
    if (failed) this.boundReleases();
    this.pump();
  }

  private async runResync(): Promise<void> {
    try {
      const { items, unreadable } = await this.registry.rowsOfInstance(this.instanceId);
      for (const err of unreadable) this.report(err, { kind: "resync" });
      const now = this.clock();
      this.written.clear();
      this.releasing.clear();
      for (const row of items) this.written.set(keyOf(row), { row, writtenAt: now });
      // Everything that differs now: rows nobody backs, rows of an older incarnation or
      // session, and connected agents whose row is missing (swept, or never written). A row
      // found as it should be counts as written now: it was re-stamped within the last
      // restampAfterMs, so its TTL is still days away.
      for (const k of new Set([...this.written.keys(), ...this.desired.keys()])) {
        const want = this.desired.get(k);
        const have = this.written.get(k)?.row;
        if (want && have && have.incarnation === want.incarnation && have.session === want.session) {
          this.written.set(k, { row: want, writtenAt: now });
        }
        this.track(k);
        if (this.work(k)) this.dirty.add(k);
      }
      this.succeeded(false);
    } catch (err) {
      this.resyncWanted = true;
      this.failed(err, { kind: "resync" });
    } finally {
      this.resyncRunning = false;
    }
    this.pump();
  }

  private succeeded(resyncIfRecovering = true): void {
    const failures = this.consecutiveFailures;
    const recovering = resyncIfRecovering && failures > 0;
    this.consecutiveFailures = 0;
    this.failingSince = null;
    this.lastError = null;
    this.backoff.reset();
    // Back from an outage: rows may have been swept or left behind meanwhile.
    if (recovering) this.resyncWanted = true;
    if (failures > 0) this.emitSafely("recovered", failures);
  }

  private failed(err: unknown, write: OwnershipWrite): void {
    this.consecutiveFailures++;
    this.failingSince ??= this.clock();
    // Writes in flight together fail together: one backoff step per round, not one per write.
    if (!this.paused) this.pause(this.backoff.next());
    this.report(err, write);
  }

  private report(err: unknown, write: OwnershipWrite): void {
    const error = err instanceof Error ? err : new Error(String(err));
    this.lastError = error;
    this.emitSafely("failure", error, write);
  }

  private emitSafely(event: string, ...args: unknown[]): void {
    try {
      if (this.listenerCount(event) > 0) this.emit(event, ...args);
    } catch {
      // Reporting is best effort; state() says it too.
    }
  }
}

/** Tenant ids and agent ids have no NUL (keys.ts): an unambiguous key of one row of ours. */
function keyOf(row: Pick<OwnerRow, "tenant" | "agentId">): string {
  return `${row.tenant}\0${row.agentId}`;
}
