/**
 * The client end of the fleet's peer links: what routing calls once it has chosen the instance
 * that owns a tenant's agents. One HTTP/2 connection per peer instance (keyed by its id,
 * incarnation and address: peer-link.ts), opened on the first dial and again after a failure;
 * one stream per forwarded dial (peer-dial.ts), so each tunnel has HTTP/2's per-stream flow
 * control to itself and a stalled caller holds back only its own tunnel.
 *
 * A peer whose connection fails is avoided for a jittered, bounded backoff (peer-link.ts):
 * `isHealthy` says false and dials to it fail at once with PeerUnavailableError, so routing tries
 * another owner instead of every dial waiting out the same dead address. Tunnels open on a
 * connection that dies are broken (ConnectionBrokenError), never closed cleanly. Links of peers
 * whose lease is gone are pruned (`prune`), so a fleet that deploys many times does not
 * accumulate them.
 *
 * mTLS both ways with this instance's peer certificate; the other end must chain to the peer CA
 * and carry kgw://fleet/peer (peer-identity.ts), checked in place of a host name.
 */
import type { ClientHttp2Session } from "node:http2";
import type { TlsFiles, TlsMinVersion } from "../../config/tls.js";
import { PeerUnavailableError } from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import type { DialContext } from "../../server/core/dial-context.js";
import {
  PEER_CONNECT_TIMEOUT_MS,
  PEER_FAILURE_BACKOFF_BASE_MS,
  PEER_FAILURE_BACKOFF_MAX_MS,
  PEER_KEEPALIVE_MS,
  PEER_KEEPALIVE_TIMEOUT_MS,
  PEER_MAX_MESSAGE_BYTES,
  PEER_STREAM_HIGH_WATER_BYTES,
  PEER_WATCH_ANSWER_MS,
  PEER_WATCH_STALL_MS,
  PEER_WATCH_TICK_MS,
  peerDialTimeoutMs,
} from "../../server/durations.js";
import { GrpcClientCallStream } from "../../transport/grpc/client-call-stream.js";
import { Http2PeerWatch } from "../../transport/http2-peer-watch.js";
import { tcpPeerGone } from "../../transport/node-internals.js";
import { readPem } from "../../transport/tls-files.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import { askPeerAgents, type PeerAgentsAnswer, type ProbeReason } from "./peer-agents-call.js";
import { PEER_PROXY_PATH, peerContextHeaders } from "./peer-context.js";
import { PeerDial, type PeerDialOutcome } from "./peer-dial.js";
import { type PeerInstance, PeerLink, type PeerTimings, type PeerTlsMaterial } from "./peer-link.js";
import { askPeerStatus, type PeerStatusAnswer } from "./peer-status-call.js";

export type { PeerInstance, PeerTimings, PeerTlsMaterial } from "./peer-link.js";

export interface PeerLinksOptions {
  /** This instance's --server-id, sent as the origin of every forwarded dial. */
  instanceId: string;
  tls: PeerTlsMaterial;
  log: Logger;
  metrics?: ServerMetrics;
  /**
   * --backend-dial-timeout (0: none), which the owner applies to the dial: a forwarded dial
   * waits that long for the owner's answer, plus PEER_DIAL_TIMEOUT_MARGIN_MS (peerDialTimeoutMs).
   */
  backendDialTimeoutMs: number;
  /** For tests: shorter durations than lib/server/durations.ts. */
  timings?: Partial<PeerTimings>;
  /** For tests: the clock failures are timed by, and the jitter of their backoff. */
  clock?: () => number;
  random?: () => number;
}

/** Reads the PEM files of --peer-cert, --peer-key and --peer-ca-cert (at start: errors are config). */
export function readPeerTls(files: TlsFiles, minVersion?: TlsMinVersion): PeerTlsMaterial {
  return {
    cert: readPem(files.cert, "--peer-cert"),
    key: readPem(files.key, "--peer-key"),
    ca: readPem(files.ca, "--peer-ca-cert"),
    ...(minVersion ? { minVersion } : {}),
  };
}

export class PeerLinks {
  private readonly links = new Map<string, PeerLink>();
  /** Links pruned with tunnels still on them: closed at close() if they have not ended by then. */
  private readonly retiring = new Set<PeerLink>();
  private readonly watch: Http2PeerWatch;
  private readonly timings: PeerTimings;
  private readonly log: Logger;
  private readonly dialTimeoutMs: number;
  private closed = false;

  constructor(private readonly opts: PeerLinksOptions) {
    this.log = opts.log.child({ component: "peer-links" });
    this.timings = {
      connectTimeoutMs: PEER_CONNECT_TIMEOUT_MS,
      failureBackoffBaseMs: PEER_FAILURE_BACKOFF_BASE_MS,
      failureBackoffMs: PEER_FAILURE_BACKOFF_MAX_MS,
      keepaliveMs: PEER_KEEPALIVE_MS,
      keepaliveTimeoutMs: PEER_KEEPALIVE_TIMEOUT_MS,
      ...opts.timings,
    };
    this.dialTimeoutMs = peerDialTimeoutMs(opts.backendDialTimeoutMs);
    this.watch = new Http2PeerWatch({
      tickMs: PEER_WATCH_TICK_MS,
      stallMs: PEER_WATCH_STALL_MS,
      answerMs: Math.min(PEER_WATCH_ANSWER_MS, this.timings.keepaliveTimeoutMs),
      disconnected: tcpPeerGone,
      onClosed: (reason) => {
        opts.metrics?.deadHttp2Peers.inc({ listener: "peer-link", reason });
        this.log.warn({ reason }, "closed a peer link whose peer is gone");
      },
    });
    opts.metrics?.onPeerCollect(() => {
      opts.metrics?.failingPeers.set(this.failingCount());
      opts.metrics?.peerLinks.set(this.links.size);
    });
  }

  /**
   * Forwards one dial to `peer`, which is to serve it from its own agents, as `ctx`'s caller. The
   * answer comes through `frontend` as from a local agent: established (then data both ways) or
   * dialFailed, with PeerNotHereError (the peer has no agent of the tenant: re-read the owners,
   * retry once) or PeerUnavailableError (the peer could not be reached or is draining: try another
   * owner) among the failures. Throws PeerUnavailableError at once for a peer marked failing.
   */
  dial(peer: PeerInstance, ctx: DialContext, req: DialRequest, frontend: FrontendEnd): DialHandle {
    const link = this.linkFor(peer);
    const failing = this.closed ? "peer links are closed" : link.failing();
    if (failing !== null) {
      this.counted("unavailable");
      throw new PeerUnavailableError(peer.id, failing);
    }
    let session: ClientHttp2Session;
    let stream: ReturnType<ClientHttp2Session["request"]>;
    try {
      session = link.session();
      stream = session.request(
        {
          ":method": "POST",
          ":path": PEER_PROXY_PATH,
          "content-type": "application/grpc",
          te: "trailers",
          ...peerContextHeaders(ctx.caller, ctx.frontend, this.opts.instanceId, ctx.dialId),
        },
        { endStream: false },
      );
    } catch (err) {
      // The session closed under us (GOAWAY just arrived): the next dial opens another.
      link.markFailing("stream", `cannot open a stream: ${(err as Error).message}`);
      this.counted("unavailable");
      throw new PeerUnavailableError(peer.id, (err as Error).message);
    }
    ctx.observer?.forwarded?.(peer.id);
    const call = new GrpcClientCallStream(stream, PEER_MAX_MESSAGE_BYTES, PEER_STREAM_HIGH_WATER_BYTES);
    const dial = new PeerDial(call, frontend, {
      peer: peer.id,
      dialTimeoutMs: this.dialTimeoutMs,
      linkLost: () => link.lostReason(session),
      outcome: (outcome) => this.counted(outcome),
      answeredBy: (agentId) => ctx.observer?.routed(agentId, peer.id),
    });
    dial.start(req);
    return dial;
  }

  /**
   * Asks `peer` how many of `tenant`'s agents it holds (peer-agents-call.ts), within `timeoutMs`.
   * A peer marked failing is not asked ("unavailable"); a probe that cannot connect marks it as
   * a dial would. Never rejects.
   */
  async askAgents(
    peer: PeerInstance,
    tenant: string,
    timeoutMs: number,
    reason: ProbeReason = "registry_unreadable",
  ): Promise<PeerAgentsAnswer> {
    const link = this.linkFor(peer);
    let answer: PeerAgentsAnswer = "unavailable";
    if (!this.closed && link.failing() === null) {
      let session: ClientHttp2Session | null = null;
      try {
        session = link.session();
      } catch {
        // The session could not even be made: counted as a connect failure by the link.
      }
      if (session) answer = await askPeerAgents(session, tenant, this.opts.instanceId, timeoutMs);
    }
    this.opts.metrics?.peerProbes.inc({
      answer: typeof answer === "string" ? answer : answer.agents > 0 ? "has_agents" : "no_agents",
      reason,
    });
    return answer;
  }

  /**
   * Asks `peer` for its status slice (peer-status-call.ts), for `tenant` only when given, within
   * `timeoutMs`. A peer marked failing is not asked ("unreachable", with why). Never rejects.
   */
  async askStatus(
    peer: PeerInstance,
    tenant: string | undefined,
    timeoutMs: number,
  ): Promise<PeerStatusAnswer> {
    if (this.closed) return { failure: "unreachable", detail: "peer links are closed" };
    const link = this.linkFor(peer);
    const failing = link.failing();
    if (failing !== null) return { failure: "unreachable", detail: failing };
    let session: ClientHttp2Session;
    try {
      session = link.session();
    } catch (err) {
      return { failure: "unreachable", detail: (err as Error).message };
    }
    return askPeerStatus(session, this.opts.instanceId, tenant, timeoutMs);
  }

  /** False while `peer` is marked failing (routing should prefer another owner). */
  isHealthy(peer: PeerInstance): boolean {
    return this.links.get(keyOf(peer))?.failing() == null;
  }

  /**
   * Forgets the links of peers `keep` no longer names (their lease is gone, or a newer
   * incarnation holds their id): those connected are retired (their tunnels finish, no new ones
   * start). Called after each read of the leases; returns how many were pruned.
   */
  prune(keep: (peer: PeerInstance) => boolean): number {
    let pruned = 0;
    for (const [key, link] of this.links) {
      if (keep(link.peer)) continue;
      this.links.delete(key);
      pruned++;
      if (link.connected) {
        this.retiring.add(link);
        link.retire();
        void link.whenClosed().then(() => this.retiring.delete(link));
      }
    }
    return pruned;
  }

  /** Peers with a link (connected, failing or idle), for tests and metrics. */
  get size(): number {
    return this.links.size;
  }

  /** Connections open (or opening) now, for tests and metrics. */
  get connectionCount(): number {
    let n = 0;
    for (const link of this.links.values()) if (link.connected) n++;
    return n;
  }

  /** Closes every link: open tunnels on them break. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.links.values(), ...this.retiring].map((l) => l.close()));
    this.links.clear();
    this.retiring.clear();
    this.watch.close();
  }

  private linkFor(peer: PeerInstance): PeerLink {
    const key = keyOf(peer);
    let link = this.links.get(key);
    if (!link) {
      link = new PeerLink(peer, {
        tls: this.opts.tls,
        timings: this.timings,
        watch: this.watch,
        log: this.log.child({ peer: peer.id, incarnation: peer.incarnation }),
        ...(this.opts.metrics ? { metrics: this.opts.metrics } : {}),
        clock: this.opts.clock ?? Date.now,
        random: this.opts.random ?? Math.random,
      });
      this.links.set(key, link);
    }
    return link;
  }

  private failingCount(): number {
    let n = 0;
    for (const link of this.links.values()) if (link.failing() !== null) n++;
    return n;
  }

  private counted(outcome: PeerDialOutcome): void {
    this.opts.metrics?.peerDials.inc({ outcome });
  }
}

function keyOf(peer: PeerInstance): string {
  return `${peer.id}#${peer.incarnation ?? 0}@${peer.host}:${peer.port}`;
}
