/**
 * Follows one dial from the gateway's Dialer to its end, for its audit record and its tenant's
 * metrics. It wraps the three things a dial passes around (the caller's FrontendEnd, the
 * BackendLink it gets once established, the DialHandle it can cancel with), so it sees every way
 * a dial ends, whatever directory or transport carried it (the local registry or, later, a peer
 * link), and the core needs to know nothing of it.
 *
 * Cost on the data path: one extra call and two integer additions per chunk each way; the
 * wrappers are made once per dial. Nothing is logged or allocated per chunk.
 */
import { randomUUID } from "node:crypto";
import { performance } from "node:perf_hooks";
import { type ErrorCode, GatewayError } from "../../errors.js";
import { refusalDetails } from "../../transport/refusal-details.js";
import type { BackendLink, DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import type { DialContext, DialObserver } from "../core/dial-context.js";
import { buildDialRecord, type DialOutcome, dialFailureOutcome, tunnelEndOutcome } from "./audit-record.js";
import type { AuditSink } from "./audit-sink.js";
import type { TenantMetrics, TenantSeries } from "./tenant-metrics.js";

/** What the status API keeps of each dial (lib/server/status/tenant-activity.ts implements it). */
export interface DialActivity {
  tunnel(tenant: string, delta: 1 | -1): void;
  dialEnded(tenant: string, end: { outcome: DialOutcome; code: string | null; dialId: string }): void;
}

export interface DialTrackerDeps {
  sink: AuditSink;
  tenants: TenantMetrics;
  /** This server's ID (--server-id), the record's `instance`. */
  instance: string;
  /** The status API's per-tenant counters (a map increment per dial; absent: none kept). */
  activity?: DialActivity;
  /**
   * What the gateway cuts open tunnels with once it stops (a drain's end, an immediate stop), or
   * null: a caller's end closed then was cut by the gateway, not closed by the caller.
   */
  cutting?: () => GatewayError | null;
}

type State = "dialing" | "open" | "done";

/** What the gateway's Dialer asks of whatever follows a dial. */
export interface DialTracking {
  /** The context to dial with. */
  readonly context: DialContext;
  frontend(end: FrontendEnd): FrontendEnd;
  handle(handle: DialHandle): DialHandle;
  /** The dial was refused before it was sent (thrown by the Dialer). */
  failed(err: unknown): void;
}

/**
 * A dial another instance forwarded here (DialContext.origin): that instance follows it, writes
 * its one audit record and counts it in its tenant's metrics, so this one does neither (it counts
 * it in kgw_server_peer_dials_served_total).
 */
export function forwardedDial(ctx: DialContext): DialTracking {
  return { context: ctx, frontend: (end) => end, handle: (handle) => handle, failed: () => {} };
}

export class DialTracker implements DialObserver, DialTracking {
  /** The context to dial with: the caller's, with this tracker as its observer. */
  readonly context: DialContext;
  private state: State = "dialing";
  private agentId: string | null = null;
  private owner: string | null = null;
  private bytesFromCaller = 0;
  private bytesToCaller = 0;
  private readonly startedAt = performance.now();
  private answeredAt = 0;
  private readonly series: TenantSeries;

  constructor(
    ctx: DialContext,
    private readonly req: DialRequest,
    private readonly deps: DialTrackerDeps,
  ) {
    // A random id (122 bits): unique without coordination between instances.
    this.context = { ...ctx, dialId: ctx.dialId ?? randomUUID(), observer: this };
    this.series = deps.tenants.dialStarted(ctx.caller.tenant);
    ctx.steps?.mark("audit");
  }

  routed(agentId: string, owner = this.deps.instance): void {
    this.agentId = agentId;
    this.owner = owner;
  }

  forwarded(owner: string): void {
    this.agentId = null;
    this.owner = owner;
  }

  /** The dial was refused before it was sent (thrown by the Dialer). */
  failed(err: unknown): void {
    const typed = err instanceof GatewayError ? err : undefined;
    this.end(dialFailureOutcome(typed?.code ?? null), typed?.code ?? null, typed);
  }

  /** The caller's end, counting what it is handed and seeing how the dial ends. */
  frontend(end: FrontendEnd): FrontendEnd {
    return {
      established: (link) => {
        // A late answer to a dial already recorded (cancelled): the caller's end closes it.
        if (this.state !== "dialing") return end.established(link);
        this.state = "open";
        this.answeredAt = performance.now();
        this.series.tunnelsOpen++;
        this.deps.activity?.tunnel(this.context.caller.tenant, 1);
        end.established(this.link(link));
      },
      dialFailed: (err) => {
        this.end(dialFailureOutcome(err.code), err.code, err);
        end.dialFailed(err);
      },
      deliver: (data, flushed) => {
        const n = data.byteLength;
        this.bytesToCaller += n;
        this.series.toClient += n;
        return end.deliver(data, flushed);
      },
      onceWritable: (cb) => end.onceWritable(cb),
      closed: (err) => {
        this.end(tunnelEndOutcome(err?.code ?? null), err?.code ?? null);
        end.closed(err);
      },
    };
  }

  /** The handle the caller cancels with: a cancel while the dial is pending is its end. */
  handle(handle: DialHandle): DialHandle {
    return {
      cancel: () => {
        if (this.state === "dialing") this.end("cancelled", "ERR_DIAL_CANCELLED");
        handle.cancel();
      },
    };
  }

  private link(link: BackendLink): BackendLink {
    return {
      send: (data) => {
        const n = data.byteLength;
        this.bytesFromCaller += n;
        this.series.toAgent += n;
        return link.send(data);
      },
      onceWritable: (cb) => link.onceWritable(cb),
      close: () => {
        // The caller closed (or was closed: its stream ended, its credential was revoked), or
        // the stopping gateway closed its socket (a tunnel over a peer link is only cut there).
        const cut = this.deps.cutting?.() ?? null;
        this.end(tunnelEndOutcome(cut?.code ?? null), cut?.code ?? null);
        link.close();
      },
    };
  }

  /** Exactly once per dial: the tenant's counters, then the record. */
  private end(outcome: DialOutcome, code: ErrorCode | null, err?: GatewayError): void {
    if (this.state === "done") return;
    const now = performance.now();
    const { caller, frontend } = this.context;
    if (this.state === "open") {
      this.series.tunnelsOpen--;
      this.deps.activity?.tunnel(caller.tenant, -1);
    } else this.answeredAt = now;
    this.state = "done";
    this.deps.tenants.dialEnded(caller.tenant, outcome);
    this.deps.activity?.dialEnded(caller.tenant, { outcome, code, dialId: this.context.dialId! });
    this.deps.sink.write(
      buildDialRecord({
        endedAt: Date.now(),
        dialId: this.context.dialId!,
        caller,
        frontend,
        instance: this.deps.instance,
        owner: this.owner,
        agentId: this.agentId,
        destination: this.req.address,
        outcome,
        code,
        ...refusalOf(err),
        bytesFromCaller: this.bytesFromCaller,
        bytesToCaller: this.bytesToCaller,
        dialMs: this.answeredAt - this.startedAt,
        durationMs: now - this.startedAt,
      }),
    );
  }
}

/** The rule or quota that refused a dial, for its record (null where none did). */
function refusalOf(err: GatewayError | undefined): {
  rule: string | null;
  quota: string | null;
  limit: number | null;
} {
  if (!err) return { rule: null, quota: null, limit: null };
  const d = refusalDetails(err);
  return { rule: d.rule ?? null, quota: d.quota ?? null, limit: d.limit ?? null };
}
