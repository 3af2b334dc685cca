/**
 * One dial that this instance's agents cannot serve, on its way to an instance that can: the
 * owners come from the cache (or a read on a miss), then the dial goes over a peer link to one
 * of them. Before the owner answers, a failure is routing's to handle, never the caller's:
 *
 * - "not here" (the owner lost the tenant's agents since we read): re-read the owners once and
 *   try again, never that instance;
 * - the peer unavailable (link down, draining, marked failing): try the next owner, and when
 *   none is left, re-read once;
 * - anything else (the agent refused, timed out) is the dial's answer, as on one instance.
 *
 * Where the owners come from when the cache cannot say is owner-lookup.ts's: the registry, or the
 * live peers when it cannot be read.
 *
 * When no owner is left, the live peers are asked (peer-probe.ts, whose answers are kept: a
 * tenant without agents costs one question per second however many dials) before the caller
 * gets what a single instance says with no agent (503). Rows are written in the background, so
 * an agent that just connected (a re-home, a rolling deploy moving every agent) is in no row for
 * the first milliseconds; without the question, every dial entering elsewhere in that gap would
 * fail while the agent is connected.
 * Cancelling at any point cancels what is in flight and nothing more is said to the caller.
 */
import {
  type GatewayError,
  NoAgentError,
  PeerNotHereError,
  PeerUnavailableError,
  toGatewayError,
} from "../errors.js";
import type { AgentDirectory, DialContext } from "../server/core/dial-context.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../tunnel/endpoints.js";
import type { InstanceView } from "./instance-view.js";
import type { OwnerCache, RouteRead } from "./owner-cache.js";
import { lookupOwners, type OwnerLookupDeps } from "./owner-lookup.js";
import type { PeerLinks } from "./peer/peer-links.js";

export interface RoutingDeps extends OwnerLookupDeps {
  /** This instance's agents: answers "no agent" the way a single instance does. */
  local: AgentDirectory;
  owners: Pick<OwnerCache, "peek" | "read">;
  instances: Pick<InstanceView, "peer">;
  links: Pick<PeerLinks, "dial" | "isHealthy">;
  /** Uniform in [0, 1): which owner first (spreads a tenant's dials over its owners). */
  random?: () => number;
}

export class RoutedDial implements DialHandle {
  private inner: DialHandle | null = null;
  private cancelled = false;
  private reread = false;
  /**
   * Whether the peers may be asked (again): at first, and after an answer that had the dial try
   * an owner it had not (which may say "not here" in its turn: the agents moved again). An
   * answer that adds no owner to try ends the asking, so a dial asks at most once per instance.
   */
  private mayProbe = true;
  private readonly tried = new Set<string>();

  constructor(
    private readonly deps: RoutingDeps,
    private readonly ctx: DialContext,
    private readonly req: DialRequest,
    private readonly frontend: FrontendEnd,
  ) {}

  /**
   * Starts routing; throws (as a directory's dial does) when it fails before any I/O: with no
   * owner known and no peers to ask.
   */
  start(): DialHandle {
    const known = this.deps.owners.peek(this.ctx.caller.tenant);
    if (known === undefined) this.readThenForward("miss");
    else this.forward(known, true);
    return this;
  }

  cancel(): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.inner?.cancel();
  }

  /**
   * Dials the first untried owner that takes it; none left: re-read once, then ask the peers
   * (again only after an answer that named a new owner), then "no agent".
   */
  private forward(owners: readonly string[], sync = false): void {
    const random = this.deps.random ?? Math.random;
    const candidates = owners.filter((id) => !this.tried.has(id));
    // Owners whose link is known to be failing last: one of them may have come back meanwhile.
    const peers = candidates
      .map((id) => this.deps.instances.peer(id))
      .filter((p) => p !== undefined)
      .sort((a, b) => Number(this.deps.links.isHealthy(b)) - Number(this.deps.links.isHealthy(a)));
    if (peers.length > 1) {
      const healthy = peers.filter((p) => this.deps.links.isHealthy(p)).length || peers.length;
      const first = Math.floor(random() * healthy);
      [peers[0], peers[first]] = [peers[first]!, peers[0]!];
    }
    for (const peer of peers) {
      this.tried.add(peer.id);
      try {
        this.inner = this.deps.links.dial(peer, this.ctx, this.req, this.answer());
        return;
      } catch (err) {
        if (!(err instanceof PeerUnavailableError)) {
          this.fail(toGatewayError(err), sync);
          return;
        }
      }
    }
    if (!this.reread && owners.length > 0) {
      this.readThenForward("not_here");
      return;
    }
    if (this.mayProbe && this.deps.probe) {
      this.probeThenForward(this.deps.probe);
      return;
    }
    this.noAgent(sync);
  }

  /** Asks the live peers where the tenant's agents are now, then forwards there (or "no agent"). */
  private probeThenForward(probe: NonNullable<RoutingDeps["probe"]>): void {
    this.mayProbe = false;
    // find never rejects.
    void probe.find(this.ctx.caller.tenant, "no_live_owner", this.tried).then((owners) => {
      if (this.cancelled) return;
      const triedBefore = this.tried.size;
      this.forward(owners);
      if (this.tried.size > triedBefore) this.mayProbe = true;
    });
  }

  private readThenForward(why: RouteRead): void {
    this.reread = true;
    lookupOwners(this.deps, this.ctx.caller.tenant, why, this.tried).then(
      (owners) => {
        if (!this.cancelled) this.forward(owners);
      },
      (err: Error) => {
        if (this.cancelled) return;
        this.fail(
          err instanceof NoAgentError
            ? err
            : new NoAgentError(`cannot find the tenant's agents: ${err.message}`),
          false,
        );
      },
    );
  }

  /** The caller's end, seen through routing until the owner has answered. */
  private answer(): FrontendEnd {
    const f = this.frontend;
    return {
      established: (link) => f.established(link),
      dialFailed: (err) => {
        if (this.cancelled) return;
        if (err instanceof PeerNotHereError && !this.reread) this.readThenForward("not_here");
        else if (err instanceof PeerNotHereError || err instanceof PeerUnavailableError)
          this.forwardAfterMiss();
        else f.dialFailed(err);
      },
      deliver: (data, flushed) => f.deliver(data, flushed),
      onceWritable: (cb) => f.onceWritable(cb),
      closed: (err) => f.closed(err),
    };
  }

  /** Another owner from what is known now (the cache), or "no agent". */
  private forwardAfterMiss(): void {
    this.forward(this.deps.owners.peek(this.ctx.caller.tenant) ?? [], false);
  }

  /** What one instance says with no agent of the tenant: the local directory's own error. */
  private noAgent(sync: boolean): void {
    try {
      // Throws NoAgentError with the single instance's words; in a race it may even find a
      // local agent that connected since, and then that is the answer.
      this.inner = this.deps.local.dial(this.ctx, this.req, this.frontend);
    } catch (err) {
      this.fail(toGatewayError(err), sync);
    }
  }

  private fail(err: GatewayError, sync: boolean): void {
    if (sync) throw err;
    this.frontend.dialFailed(err);
  }
}
