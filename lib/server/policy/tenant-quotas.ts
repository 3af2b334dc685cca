/**
 * Enforcing tenants' quotas (lib/tenancy/quotas.ts) on this instance: every dial takes a token
 * from its tenant's bucket and a tunnel slot it gives back when the tunnel ends; every agent
 * stream is counted against the tenant's agents. What one tenant uses is its own: counters and
 * buckets are per tenant, so a tenant at its limits is refused before it can take anything from
 * another (its dials never reach the agent directory, its agents never the registry).
 *
 * The limits are read from the tenant's record at each check, so a change in the store applies
 * to the next dial; the state (a bucket, a count) lives here, per instance.
 */
import { QuotaExceededError } from "../../errors.js";
import { effectiveQuotas, type QuotaName, type TenantQuotas } from "../../tenancy/quotas.js";
import type { TenantLookup } from "../../tenancy/verify.js";
import type { DialHandle, FrontendEnd } from "../../tunnel/endpoints.js";
import { CONNECTION_WINDOW_BYTES, type WindowBudget } from "../../tunnel/flow-control.js";
import { QUOTA_RETRY_AFTER_SECONDS } from "../durations.js";

const MIB = 1024 * 1024;

/** Gives back what an acquire took; safe to call more than once. */
export type Release = () => void;

/** What a dial holds of its tenant's quotas until its tunnel ends. */
export interface TunnelSlot {
  /** Gives the slot back, and the tunnel's base window with it. */
  release: Release;
  /** Where the tunnel's window grows from (DialContext.windowBudget); absent: no budget. */
  windowBudget?: WindowBudget;
}

export interface QuotaBook {
  /** A dial of `tenant`: throws QuotaExceededError, or returns what it holds until it ends. */
  acquireTunnel(tenant: string): TunnelSlot;
  /** An agent stream of `tenant`, of which `connected` are open here now; throws when at the limit. */
  admitAgent(tenant: string, connected: number): void;
}

/** No quotas: the drop-in konnectivity-server serves one control plane, all of it its own. */
export const unlimitedQuotas: QuotaBook = {
  acquireTunnel: () => ({ release: () => {} }),
  admitAgent: () => {},
};

interface TenantState {
  tunnels: number;
  /** Bytes of receive window held: every tunnel's base window, and what windows grew by. */
  buffered: number;
  tokens: number;
  /** When `tokens` was last brought up to date, in ms (the injected clock). */
  at: number;
}

export interface TenantQuotaOptions {
  lookup: TenantLookup;
  defaults: Required<TenantQuotas>;
  /** Told of every refusal, by quota (for metrics). */
  refused(quota: QuotaName): void;
  /** Milliseconds, monotonic; tests move it. */
  now?: () => number;
}

export function tenantQuotas(o: TenantQuotaOptions): QuotaBook {
  const now = o.now ?? (() => performance.now());
  const states = new Map<string, TenantState>();
  const limitsOf = (tenant: string) => effectiveQuotas(o.lookup(tenant)?.quotas ?? {}, o.defaults);

  const refuse = (
    tenant: string,
    quota: QuotaName,
    limit: number,
    message: string,
    retryAfterSeconds = QUOTA_RETRY_AFTER_SECONDS,
  ): never => {
    o.refused(quota);
    throw new QuotaExceededError(quota, message, { tenant, limit, retryAfterSeconds });
  };

  return {
    acquireTunnel(tenant) {
      const limits = limitsOf(tenant);
      const t = now();
      let s = states.get(tenant);
      if (!s) {
        s = { tunnels: 0, buffered: 0, tokens: limits.dialBurst, at: t };
        states.set(tenant, s);
      }
      // Refill for the time since the last dial, never above the burst.
      s.tokens = Math.min(limits.dialBurst, s.tokens + ((t - s.at) / 1000) * limits.dialsPerSecond);
      s.at = t;
      if (s.tunnels >= limits.maxTunnels) {
        refuse(
          tenant,
          "maxTunnels",
          limits.maxTunnels,
          `tenant ${tenant} has ${s.tunnels} tunnels open, its quota (maxTunnels ${limits.maxTunnels})`,
        );
      }
      if (s.tokens < 1) {
        refuse(
          tenant,
          "dialsPerSecond",
          limits.dialsPerSecond,
          `tenant ${tenant} is dialing faster than its quota (dialsPerSecond ${limits.dialsPerSecond}, dialBurst ${limits.dialBurst})`,
          // When the bucket holds a whole token again; Retry-After counts whole seconds.
          Math.max(1, Math.ceil((1 - s.tokens) / limits.dialsPerSecond)),
        );
      }
      const budget = limits.maxBufferedMiB * MIB;
      if (s.buffered + CONNECTION_WINDOW_BYTES > budget) {
        refuse(
          tenant,
          "maxBufferedMiB",
          limits.maxBufferedMiB,
          `tenant ${tenant} holds ${Math.round(s.buffered / MIB)} MiB in its tunnels here, its quota (maxBufferedMiB ${limits.maxBufferedMiB})`,
        );
      }
      s.tokens -= 1;
      s.tunnels += 1;
      s.buffered += CONNECTION_WINDOW_BYTES;
      const state = s;
      const windowBudget: WindowBudget = {
        // Read the limit when asked: a change in the store applies to windows growing from then on.
        take: (bytes) => {
          const free = limitsOf(tenant).maxBufferedMiB * MIB - state.buffered;
          const granted = Math.max(0, Math.min(bytes, free));
          state.buffered += granted;
          return granted;
        },
        give: (bytes) => {
          state.buffered -= bytes;
        },
      };
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        state.tunnels -= 1;
        state.buffered -= CONNECTION_WINDOW_BYTES;
        // Forget an idle tenant once its bucket would be full again: no state per tenant that
        // dials once in a while, and none at all for a deleted one.
        if (
          state.tunnels === 0 &&
          state.buffered <= 0 &&
          state.tokens + ((now() - state.at) / 1000) * limits.dialsPerSecond >= limits.dialBurst
        ) {
          if (states.get(tenant) === state) states.delete(tenant);
        }
      };
      return { release, windowBudget };
    },
    admitAgent(tenant, connected) {
      const { maxAgents } = limitsOf(tenant);
      if (connected >= maxAgents) {
        refuse(
          tenant,
          "maxAgents",
          maxAgents,
          `tenant ${tenant} has ${connected} agents connected here, its quota (maxAgents ${maxAgents})`,
        );
      }
    },
  };
}

/**
 * `frontend` and `handle` with the tunnel slot given back when the tunnel ends, whichever way:
 * the dial fails, either side closes the connection, or the caller cancels the dial.
 */
export function releasingOnEnd(frontend: FrontendEnd, release: Release): FrontendEnd {
  return {
    // The caller may end the tunnel from its side: the link's close is the end then.
    established: (link) =>
      frontend.established({
        send: (data) => link.send(data),
        onceWritable: (cb) => link.onceWritable(cb),
        close: () => {
          release();
          link.close();
        },
      }),
    dialFailed: (err) => {
      release();
      frontend.dialFailed(err);
    },
    deliver: (data, flushed) => frontend.deliver(data, flushed),
    onceWritable: (cb) => frontend.onceWritable(cb),
    closed: (err) => {
      release();
      frontend.closed(err);
    },
  };
}

export function releasingOnCancel(handle: DialHandle, release: Release): DialHandle {
  return {
    cancel: () => {
      release();
      handle.cancel();
    },
  };
}
