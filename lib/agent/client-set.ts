/**
 * Keeps the agent connected to every proxy server, like upstream's ClientSet: behind a load
 * balancer the agent cannot choose a server, so it keeps opening streams, keeps the first one to
 * each distinct serverID and closes duplicates, until it holds as many distinct servers as the
 * servers say there are (their serverCount header).
 *
 * The loop is event-driven: an attempt runs when the set is short of servers, at most one at a
 * time, and nothing runs while it is complete; a lost connection starts it again. Delays:
 *  - failure, or a duplicate server (no progress): exponential backoff with full jitter;
 *  - a new server: backoff resets; if still short, the next attempt follows after --sync-interval;
 *  - a connection lost: the next attempt waits a jittered backoff delay, so that the agents of a
 *    dead server do not all hit the survivors in the same instant.
 *
 * Target count: the highest serverCount announced by the servers currently connected (1 when
 * none). Counting only live servers lets the target shrink after a scale-down; upstream instead
 * keeps the count from the most recent new server.
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
import { Backoff } from "./backoff.js";

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
  private readonly backoff: Backoff;
  private timer: NodeJS.Timeout | undefined;
  /** The connect attempt in flight, if any; at most one at a time. */
  private attempting: Promise<void> | null = null;
  /** Delay before the next attempt, chosen by the attempt that just ended. */
  private nextDelayMs = 0;
  private draining = false;
  private stopped = false;

  constructor(private readonly opts: ClientSetOptions) {
    super();
    this.backoff = new Backoff({
      baseMs: opts.syncIntervalMs,
      capMs: opts.syncIntervalCapMs,
      random: opts.random,
    });
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
    await Promise.all([...ending, this.attempting]);
  }

  private get wanted(): boolean {
    return !this.draining && !this.stopped && this.links.size < this.targetServerCount;
  }

  private schedule(delayMs: number): void {
    this.cancelTimer();
    if (!this.wanted || this.attempting) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (!this.wanted || this.attempting) return;
      this.attempting = this.attempt().finally(() => {
        this.attempting = null;
        this.schedule(this.nextDelayMs);
      });
    }, delayMs);
    // The agent's listeners keep the process alive; this timer alone must not.
    this.timer.unref();
  }

  private cancelTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private async attempt(): Promise<void> {
    let link: ServerLink;
    try {
      link = await this.opts.connect();
    } catch (err) {
      this.opts.metrics.serverConnectAttempts.inc({ outcome: "failed" });
      this.nextDelayMs = this.backoff.next();
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
      this.nextDelayMs = this.backoff.next();
      this.opts.log.debug(
        { serverId: link.serverId, retryInMs: this.nextDelayMs },
        "reached an already connected server",
      );
      return;
    }
    this.add(link);
    this.backoff.reset();
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
      this.schedule(this.backoff.next());
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
