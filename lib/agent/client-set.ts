/**
 * Keeps the agent connected to every proxy server, like upstream's ClientSet: behind a load
 * balancer the agent cannot choose a server, so it keeps opening streams, keeps the first one to
 * each distinct serverID and closes duplicates, until it holds as many distinct servers as the
 * servers say there are (their serverCount header).
 *
 * The loop is event-driven: an attempt runs when the set is short of servers, one at a time,
 * and nothing runs while it is complete; a lost connection starts it again. Delays:
 *  - a failed connect: exponential backoff with full jitter, the only delay that grows with
 *    failures, reset by a new server;
 *  - a duplicate server (no progress, but nothing failed): a backoff of its own, so that an
 *    agent short of servers does not cost a handshake every second forever; reset whenever the
 *    set changes;
 *  - a new server: if still short, the next attempt follows after --sync-interval;
 *  - a connection lost: the next attempt at once, jittered within --sync-interval (so that the
 *    agents of a dead server do not all hit the survivors in the same instant), whatever
 *    duplicates or failures came before it.
 * While the agent holds no server at all, an attempt that has not been answered within
 * CONNECT_HEDGE_AFTER_MS is joined by another (up to MAX_CONNECT_ATTEMPTS_IN_FLIGHT): behind a
 * load balancer the slow one may sit on a frozen server, and the next may reach a live one.
 *
 * Target count: the highest serverCount announced by the servers currently connected (1 when
 * none), in their headers or since (our servers tell our agents when the fleet changes,
 * lib/tunnel/server-count-updates.ts). Counting only live servers lets the target shrink after a
 * scale-down; upstream instead keeps the count from the most recent new server, and learns of a
 * larger fleet only by connecting again (--sync-forever).
 *
 * A server that sends DRAIN (it is shutting down; lib/tunnel/drain-advice.ts) is retired: it no
 * longer counts towards the target, so a replacement is dialed at once through the same address
 * (behind a load balancer, another instance; a closed listener fails and backs off as usual),
 * while the tunnels already open on it go on. It is ended in order once they are done, or closed when the
 * server closes it: make-before-break.
 */
import { EventEmitter } from "node:events";
import type { AgentMetrics } from "../metrics/agent-metrics.js";
import type { Logger } from "../observability/logger.js";
import { Backoff } from "../util/backoff.js";
import { CONNECT_HEDGE_AFTER_MS } from "./durations.js";

/**
 * Connect attempts at once while the agent has no server: one, and a hedge for each
 * CONNECT_HEDGE_AFTER_MS the earlier ones go unanswered. Bounded so that an agent facing a slow
 * fleet adds at most this many handshakes to it.
 */
export const MAX_CONNECT_ATTEMPTS_IN_FLIGHT = 3;

/** What the set needs from one server connection; ServerConnection implements it. */
export interface ServerLink {
  readonly serverId: string;
  readonly serverCount: number;
  readonly load: number;
  /** Sends DRAIN to the server (the agent is going away). */
  drain(): void;
  /** Closes at once. */
  close(reason: string): void;
  /**
   * Ends the stream in order (what was sent, DRAIN among it, arrives); resolves once it is over.
   * `drained`: a draining server's last tunnel is done, so the end follows its last bytes.
   */
  end(reason: string, opts?: { drained?: boolean }): Promise<void>;
  on(event: "closed", listener: (reason: string) => void): unknown;
  on(event: "load", listener: (load: number) => void): unknown;
  /** The server sent DRAIN: it is shutting down (drain advice). */
  on(event: "serverDraining", listener: () => void): unknown;
  /** The server announced a new serverCount (the fleet changed); `serverCount` is updated. */
  on(event: "serverCount", listener: (count: number) => void): unknown;
}

export interface ClientSetOptions {
  /** Opens one stream to whichever server the address leads to. */
  connect: () => Promise<ServerLink>;
  syncIntervalMs: number;
  syncIntervalCapMs: number;
  /** Uniform in [0, 1); injected by tests. */
  random?: () => number;
  log: Logger;
  metrics: AgentMetrics;
}

export interface ClientSetState {
  connectedServers: string[];
  /** Servers that sent DRAIN, still carrying tunnels opened before; not in connectedServers. */
  drainingServers: string[];
  targetServerCount: number;
  draining: boolean;
  stopped: boolean;
  /** Dials in flight plus open backend connections over all servers. */
  load: number;
}

export class ClientSet extends EventEmitter<{ change: [state: ClientSetState]; load: [load: number] }> {
  private readonly links = new Map<string, ServerLink>();
  /** Retired on the server's DRAIN: serving their open tunnels until these end; by serverID. */
  private readonly retiring = new Map<string, ServerLink>();
  /** Grows with failed connects only. */
  private readonly failures: Backoff;
  /** Paces attempts that keep reaching servers already held; reset when the set changes. */
  private readonly duplicates: Backoff;
  private readonly random: () => number;
  private timer: NodeJS.Timeout | undefined;
  private hedgeTimer: NodeJS.Timeout | undefined;
  /** Connect attempts in flight: one, or more while hedging (MAX_CONNECT_ATTEMPTS_IN_FLIGHT). */
  private readonly attempts = new Set<Promise<void>>();
  /** Delay before the next attempt, chosen by the attempt that just ended. */
  private nextDelayMs = 0;
  /** A server was lost while attempts were in flight: the delay to use once they are over. */
  private afterLossMs: number | null = null;
  private draining = false;
  private stopped = false;

  constructor(private readonly opts: ClientSetOptions) {
    super();
    const backoff = { baseMs: opts.syncIntervalMs, capMs: opts.syncIntervalCapMs, random: opts.random };
    this.failures = new Backoff(backoff);
    this.duplicates = new Backoff(backoff);
    this.random = opts.random ?? Math.random;
  }

  start(): void {
    this.schedule(0);
  }

  get ready(): boolean {
    return this.links.size > 0 || this.retiring.size > 0;
  }

  get targetServerCount(): number {
    let target = 1;
    for (const link of this.links.values()) target = Math.max(target, link.serverCount);
    return target;
  }

  get load(): number {
    let load = 0;
    for (const link of this.links.values()) load += link.load;
    for (const link of this.retiring.values()) load += link.load;
    return load;
  }

  state(): ClientSetState {
    return {
      connectedServers: [...this.links.keys()],
      drainingServers: [...this.retiring.keys()],
      targetServerCount: this.targetServerCount,
      draining: this.draining,
      stopped: this.stopped,
      load: this.load,
    };
  }

  /** Sends DRAIN to every server and opens no new connections; open ones keep serving. */
  drain(): void {
    if (this.draining || this.stopped) return;
    this.draining = true;
    this.cancelTimer();
    for (const link of [...this.links.values(), ...this.retiring.values()]) link.drain();
    this.changed();
  }

  /**
   * Closes every server connection (and with them every backend connection), each stream ended
   * in order so that a DRAIN sent just before reaches its server. Resolves once those streams are
   * over and a connect attempt in flight has settled too, so nothing is left opening after stop.
   */
  async stop(): Promise<void> {
    let ending: Promise<void>[] = [];
    if (!this.stopped) {
      this.stopped = true;
      this.cancelTimer();
      ending = [...this.links.values(), ...this.retiring.values()].map((link) => link.end("agent stopping"));
      this.changed();
    }
    await Promise.all([...ending, ...this.attempts]);
  }

  private get wanted(): boolean {
    return !this.draining && !this.stopped && this.links.size < this.targetServerCount;
  }

  private schedule(delayMs: number): void {
    this.cancelTimer();
    if (!this.wanted || this.attempts.size > 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.wanted && this.attempts.size === 0) this.startAttempt();
    }, delayMs);
    // The agent's listeners keep the process alive; this timer alone must not.
    this.timer.unref();
  }

  private startAttempt(): void {
    const attempt: Promise<void> = this.attempt().finally(() => {
      this.attempts.delete(attempt);
      if (this.attempts.size > 0) return; // the last one to finish schedules the next
      this.cancelHedge();
      const delay = Math.min(this.nextDelayMs, this.afterLossMs ?? Number.POSITIVE_INFINITY);
      this.afterLossMs = null;
      this.schedule(delay);
    });
    this.attempts.add(attempt);
    this.armHedge();
  }

  /** With no server at all, an attempt left unanswered is joined by another (see the top). */
  private armHedge(): void {
    if (this.hedgeTimer || this.links.size > 0 || this.attempts.size === 0) return;
    if (this.attempts.size >= MAX_CONNECT_ATTEMPTS_IN_FLIGHT) return;
    this.hedgeTimer = setTimeout(() => {
      this.hedgeTimer = undefined;
      if (!this.wanted || this.links.size > 0 || this.attempts.size === 0) return;
      if (this.attempts.size >= MAX_CONNECT_ATTEMPTS_IN_FLIGHT) return;
      this.opts.metrics.serverConnectHedges.inc();
      this.opts.log.info(
        { inFlight: this.attempts.size, afterMs: CONNECT_HEDGE_AFTER_MS },
        "no proxy server answered yet; trying another connection alongside",
      );
      this.startAttempt();
    }, CONNECT_HEDGE_AFTER_MS);
    this.hedgeTimer.unref();
  }

  private cancelHedge(): void {
    if (this.hedgeTimer) clearTimeout(this.hedgeTimer);
    this.hedgeTimer = undefined;
  }

  private cancelTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.cancelHedge();
  }

  /** After losing a server: at once, spread over --sync-interval (see the top). */
  private reconnectDelay(): number {
    return Math.floor(this.random() * this.opts.syncIntervalMs);
  }

  private async attempt(): Promise<void> {
    let link: ServerLink;
    try {
      link = await this.opts.connect();
    } catch (err) {
      this.opts.metrics.serverConnectAttempts.inc({ outcome: "failed" });
      this.nextDelayMs = this.failures.next();
      this.opts.log.warn(
        { err: (err as Error).message, retryInMs: this.nextDelayMs },
        "cannot connect to proxy server",
      );
      return;
    }
    if (this.draining || this.stopped) {
      link.close(this.stopped ? "agent stopping" : "agent draining");
      return;
    }
    if (this.links.has(link.serverId) || this.retiring.has(link.serverId)) {
      // Already held, or draining (it would only send us away again).
      this.opts.metrics.serverConnectAttempts.inc({ outcome: "duplicate" });
      link.close(this.links.has(link.serverId) ? "duplicate server" : "server draining");
      this.nextDelayMs = this.duplicates.next();
      this.opts.log.debug(
        { serverId: link.serverId, retryInMs: this.nextDelayMs },
        "reached an already connected server",
      );
      return;
    }
    if (!this.wanted) {
      // A hedged attempt answered after another had already completed the set.
      this.opts.metrics.serverConnectAttempts.inc({ outcome: "surplus" });
      link.close("enough servers");
      return;
    }
    this.add(link);
    this.failures.reset();
    this.duplicates.reset();
    this.nextDelayMs = this.opts.syncIntervalMs;
  }

  private add(link: ServerLink): void {
    const { serverId } = link;
    this.links.set(serverId, link);
    this.opts.metrics.serverConnectAttempts.inc({ outcome: "connected" });
    this.opts.log.info(
      { serverId, serverCount: link.serverCount, connected: this.links.size },
      "connected to proxy server",
    );
    link.on("load", (load) => {
      this.emit("load", this.load);
      if (load === 0 && this.retiring.get(serverId) === link) this.endDrained(link);
    });
    link.on("serverDraining", () => this.retire(link));
    link.on("serverCount", () => {
      if (this.links.get(serverId) !== link) return;
      this.changed();
      // A larger fleet: connect to the servers now wanted, spread as after a loss; a smaller
      // one only lowers the target (the streams held go on until they end).
      if (this.wanted && this.attempts.size === 0) this.schedule(this.reconnectDelay());
    });
    link.on("closed", (reason) => {
      if (this.retiring.get(serverId) === link) {
        // Retired earlier; its replacement was dialed then.
        this.retiring.delete(serverId);
        this.opts.log.info({ serverId, reason }, "closed the connection to a drained proxy server");
        this.changed();
        this.emit("load", this.load);
        return;
      }
      if (this.links.get(serverId) !== link) return;
      this.links.delete(serverId);
      this.opts.log.info({ serverId, reason, connected: this.links.size }, "lost proxy server");
      this.changed();
      this.emit("load", this.load);
      // Losing a server is no failure to connect: the next attempt goes at once (jittered),
      // not after a backoff that earlier duplicates or failures grew.
      this.duplicates.reset();
      const delay = this.reconnectDelay();
      if (this.attempts.size > 0) {
        this.afterLossMs = Math.min(delay, this.afterLossMs ?? delay);
        this.armHedge();
      } else {
        this.schedule(delay);
      }
    });
    this.changed();
  }

  /**
   * The server is draining: it stops counting, a replacement is dialed now, and the connection
   * goes once its tunnels are done (at once when it has none).
   */
  private retire(link: ServerLink): void {
    const { serverId } = link;
    if (this.links.get(serverId) !== link) return;
    this.links.delete(serverId);
    this.retiring.set(serverId, link);
    this.opts.log.info(
      { serverId, load: link.load, connected: this.links.size },
      "proxy server is draining; connecting to another",
    );
    this.changed();
    if (link.load === 0) this.endDrained(link);
    // Right away: the server asked us to move, and nothing failed that would call for a backoff.
    this.schedule(0);
  }

  /**
   * A draining server's connection has nothing left: end it in order. Cutting it would drop what
   * is still queued on it, the last tunnel's final DATA and CLOSE_RSP among it, and the server
   * would then fail that tunnel as if the agent had vanished.
   */
  private endDrained(link: ServerLink): void {
    void link.end("server drained", { drained: true });
  }

  private changed(): void {
    this.opts.metrics.openServerConnections.set(this.links.size);
    this.opts.metrics.knownServerCount.set(this.targetServerCount);
    this.emit("change", this.state());
  }
}
