/**
 * The fleet's side of the status API (FleetMembership.statusOf): every instance the registry
 * names, each with its status slice or the reason there is none. This instance answers for
 * itself from memory; every other live or draining instance is asked over its peer link
 * (peer-status-call.ts), at most PEER_STATUS_MAX_IN_FLIGHT at once, each within
 * PEER_STATUS_TIMEOUT_MS. One whose lease expired is not asked: it is listed as "lease
 * expired". One whose lease the sweeper removed is still listed ("lease gone") for
 * STATUS_GONE_REMEMBER_MS after a lease read last named it, so that an instance killed a minute
 * ago shows as dead rather than vanishing from the operator's view.
 *
 * Nothing here runs unless the status API is asked; the leases are the view's last read
 * (InstanceView), so a status request costs no registry read either.
 */
import type { InstanceLease } from "../registry/model.js";
import {
  PEER_STATUS_MAX_IN_FLIGHT,
  PEER_STATUS_TIMEOUT_MS,
  STATUS_GONE_REMEMBER_MS,
} from "../server/durations.js";
import type { InstanceAnswer } from "../server/status/fleet-status.js";
import type { InstanceSlice, LeaseState } from "../server/status/status-model.js";
import type { InstanceView } from "./instance-view.js";
import type { PeerLinks } from "./peer/peer-links.js";

/** A bound on instances remembered after their lease is gone: far beyond a fleet's size. */
const MAX_REMEMBERED_INSTANCES = 1_000;

export interface FleetStatusSourceOptions {
  selfId: string;
  instances: Pick<InstanceView, "all" | "judgeAt" | "peer">;
  links: Pick<PeerLinks, "askStatus">;
  clock?: () => number;
  timeoutMs?: number;
  maxInFlight?: number;
}

interface Seen {
  lease: InstanceLease;
  at: number;
}

function leaseState(lease: InstanceLease, at: number): LeaseState {
  if (lease.expiresAt <= at) return "expired";
  return lease.draining ? "draining" : "live";
}

export class FleetStatusSource {
  private readonly seen = new Map<string, Seen>();
  private readonly clock: () => number;

  constructor(private readonly opts: FleetStatusSourceOptions) {
    this.clock = opts.clock ?? Date.now;
  }

  /** After each read of the leases: what they named is remembered, what is long gone forgotten. */
  remember(): void {
    const now = this.clock();
    for (const lease of this.opts.instances.all().values()) {
      this.seen.delete(lease.instanceId);
      this.seen.set(lease.instanceId, { lease, at: now });
    }
    for (const [id, s] of this.seen) {
      if (now - s.at > STATUS_GONE_REMEMBER_MS || this.seen.size > MAX_REMEMBERED_INSTANCES)
        this.seen.delete(id);
    }
  }

  /** Every instance with its slice or why none; `self` is this instance's own. Never rejects. */
  async statusOf(self: InstanceSlice, tenant: string | undefined): Promise<InstanceAnswer[]> {
    const { instances, selfId } = this.opts;
    const leases = instances.all();
    const at = instances.judgeAt();
    const out: InstanceAnswer[] = [];
    const ask: { index: number; id: string }[] = [];
    const ids = new Set([selfId, ...leases.keys(), ...this.seen.keys()]);
    for (const id of ids) {
      const lease = leases.get(id);
      const remembered = this.seen.get(id)?.lease;
      const base = {
        id,
        peerAddress: (lease ?? remembered)?.peerAddress ?? null,
        leaseExpiresAt: (lease ?? remembered)?.expiresAt ?? null,
      };
      if (id === selfId) {
        // This instance answers for itself, whatever its lease says (it may not be written yet).
        out.push({ ...base, lease: lease ? leaseState(lease, at) : "live", slice: self, reason: null });
        continue;
      }
      if (!lease) {
        out.push({ ...base, lease: "gone", slice: null, reason: "lease gone: removed by the sweeper" });
        continue;
      }
      const state = leaseState(lease, at);
      if (state === "expired") {
        out.push({ ...base, lease: state, slice: null, reason: "lease expired" });
        continue;
      }
      ask.push({ index: out.length, id });
      out.push({ ...base, lease: state, slice: null, reason: "not asked" });
    }
    await this.askAll(ask, out, tenant);
    return out;
  }

  /** Asks the peers of `ask`, at most maxInFlight at once, filling in their entries of `out`. */
  private async askAll(
    ask: readonly { index: number; id: string }[],
    out: InstanceAnswer[],
    tenant: string | undefined,
  ): Promise<void> {
    const timeoutMs = this.opts.timeoutMs ?? PEER_STATUS_TIMEOUT_MS;
    let next = 0;
    const worker = async () => {
      while (next < ask.length) {
        const { index, id } = ask[next++]!;
        const entry = out[index]!;
        const peer = this.opts.instances.peer(id);
        if (!peer) {
          out[index] = { ...entry, reason: "unreachable: its lease names no usable peer address" };
          continue;
        }
        const answer = await this.opts.links.askStatus(peer, tenant, timeoutMs);
        out[index] =
          "slice" in answer
            ? { ...entry, slice: answer.slice, reason: null }
            : { ...entry, reason: answer.detail ? `${answer.failure}: ${answer.detail}` : answer.failure };
      }
    };
    const workers = Math.min(ask.length, Math.max(1, this.opts.maxInFlight ?? PEER_STATUS_MAX_IN_FLIGHT));
    await Promise.all(Array.from({ length: workers }, worker));
  }
}
