/**
 * The server's fixed durations, and the sizes that go with them, each with its reason: its
 * listeners and agents, its install route and audit, and its fleet's routing and peer links
 * (lib/fleet/ sits above lib/server/ and takes its durations from here). Durations an operator
 * may need to change are flags instead (lib/config/server-flags.ts); these follow from the
 * protocol or from measurement.
 *
 * One durations file per side, each at the lowest layer that needs it:
 * - lib/tunnel/durations.ts: the tunnel protocol's, shared by both sides, with the default of
 *   --backend-dial-timeout (lib/config/, below the server, refers to it);
 * - lib/registry/durations.ts: the registry's (leases, sweeps, DynamoDB requests), whose lease
 *   flags' defaults lib/config/ takes from there;
 * - lib/agent/durations.ts: the agent's;
 * - this file: the server's and its fleet's.
 * lib/transport/ (below both sides, shared by them) and lib/tenancy/ keep theirs beside the code.
 */
import { HTTP2_STREAM_WINDOW_BYTES } from "../transport/grpc/windows.js";

/** Keepalive of callers: how long to wait for a ping ack before declaring the peer dead. */
export const KEEPALIVE_TIMEOUT_MS = 20_000;

/**
 * How long a probe of an agent may go unanswered before the agent counts as unresponsive (no new
 * dials; core/agent-liveness.ts). A live agent answers a PING within milliseconds; two seconds
 * allow for a GC pause or a loaded node without letting dials queue on a frozen agent.
 */
export const AGENT_PROBE_ANSWER_MS = 2_000;

/**
 * Dead HTTP/2 peers (lib/transport/http2-peer-watch.ts): sessions silent for half a second after
 * our writes are checked; a reset socket is closed at once, a live-looking one gets a PING (the
 * time to answer is per listener: the agent port waits as long as the agent liveness timeout, so
 * a frozen agent keeps its tunnels as long as that documented bound promises).
 */
export const PEER_WATCH_TICK_MS = 500;
export const PEER_WATCH_STALL_MS = 500;

/**
 * A source throttled for being refused (lib/transport/refusal-throttle.ts) stays throttled this
 * long after its last refusal: long enough that a client retrying in a loop does not get a full
 * handshake every few seconds, short enough that one whose quota freed up is back at full speed
 * soon after (it can still open --refusal-throttle-rate connections a second meanwhile).
 */
export const REFUSAL_THROTTLE_COOLDOWN_MS = 10_000;

/**
 * Retry-After (and RetryInfo) for a quota refusal whose end cannot be computed: a tunnel slot
 * or buffered bytes come back when one of the tenant's tunnels ends, which nothing here can
 * foresee. One second is the shortest Retry-After can say; a caller that ignores it is refused
 * more cheaply each time (the refusal throttle). The dial-rate quota computes its own from the
 * token bucket (tenant-quotas.ts).
 */
export const QUOTA_RETRY_AFTER_SECONDS = 1;

/** Sources the refusal throttle remembers at once (about 100 bytes each). */
export const REFUSAL_THROTTLE_MAX_SOURCES = 10_000;

/**
 * Periodic liveness probes an instance sends a second, all agents together (agent-liveness.ts).
 * The budget for idle CPU is 10 ms a second (issue 26), and a probe with a wake-up of its own cost
 * the process about 180–260 µs of CPU (an HTTP/2 or kgw-tunnel/1 PING through TLS and its
 * answer: timers, the write, the read; `scale` scenario, 200 a second cost 36–52 ms/s): 30 a
 * second was about 8 ms/s, and sent together (idleProbeBatchMs) 1.5–2.5 ms/s at 1,000 and 10,000.
 * Up to 150 agents are still asked every 5 s; past that each is asked less often (10,000: every
 * 333 s, inside the 350 s a Network Load Balancer keeps an idle connection). A dial still brings
 * a probe along at once, so a frozen agent is still found at the first dial it fails to take.
 */
export const IDLE_PROBES_PER_SECOND = 30;

/**
 * The periodic probes whose turns have come go out together, at most once per this many ms
 * (lib/transport/turn-queue.ts): one wake-up a second for them instead of one per probe, each
 * wake-up costing more than the probe on a Firecracker VM. A probe may go this much late: a fifth
 * of the probe interval, at most a second, so short intervals (tests, the flag) keep their pace.
 */
export function idleProbeBatchMs(probeIntervalMs: number): number {
  return Math.min(1_000, probeIntervalMs / 5);
}

/**
 * TCP keepalive on every accepted connection: the kernel sends a probe after this much silence,
 * at no CPU cost to the process. A Network Load Balancer forgets a flow idle for 350 s and then
 * resets it; past IDLE_PROBES_PER_SECOND × the probe interval agents (about 10,500 at the
 * defaults) our own liveness PINGs come less often than that, and upstream agents send none of
 * their own for an hour. 60 s keeps every idle flow known to the load balancer, however many.
 */
export const CONNECTION_TCP_KEEPALIVE_MS = 60_000;

/** While shutting down, how often to check whether open tunnels have finished. */
export const DRAIN_POLL_MS = 100;

/**
 * At the stop, how long the audit log stays open for the tunnels just cut: one whose only local
 * end is its caller's socket (a dial forwarded to a peer) records itself when the socket reports
 * its close, a few ticks after it was destroyed. A bound, so that a stop always ends.
 */
export const CUT_RECORDS_MS = 1_000;

/**
 * While shutting down, at least this long is given to connections accepted just before the
 * listeners closed: their handshake and first request take milliseconds, and a dial they bring is
 * served, not cut off (a rolling restart must fail no dial).
 */
export const DRAIN_SETTLE_MS = 500;

/** Largest gRPC message accepted from a peer (upstream's servers take 16 MiB DATA packets too). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * A dial sent to an agent silent for longer than this brings a probe along (core/agent-liveness.ts).
 * Shorter would probe on nearly every dial of a busy agent, which answers with its packets anyway.
 */
export const DIAL_PROBE_AFTER_SILENCE_MS = 250;

/** After REFUSED on kgw-tunnel/1, how long the agent may take to close before we do. */
export const REFUSED_LINGER_MS = 2_000;

/**
 * Install route (install/install-route.ts), from the parsed head to the answer: a store read, a
 * conditional write (with retries), a render.
 */
export const INSTALL_ANSWER_TIMEOUT_MS = 10_000;
/** After the install route's answer, how long a client may take to read it and close before it is cut off. */
export const INSTALL_LINGER_MS = 10_000;

/** A failing audit destination (a full disk) is reported at most this often, not once per record. */
export const AUDIT_ERROR_LOG_INTERVAL_MS = 60_000;

/** How long closing the audit log waits for buffered records to reach the destination before giving up. */
export const AUDIT_CLOSE_TIMEOUT_MS = 5_000;

/**
 * How long a labelled tenant with no agent, dial or tunnel on this instance keeps its series
 * (audit/tenant-metrics.ts). Longer than a few scrape intervals, so that an agent that reconnects
 * or a tenant that dials now and then does not make its series (and its counters' history) flap;
 * short enough that tenants that moved to other instances or were deleted free their places
 * within the hour.
 */
export const TENANT_SERIES_IDLE_MS = 15 * 60_000;

/** At most one sweep for idle tenant series per this long, however often tenants come and go. */
export const TENANT_SERIES_SWEEP_MIN_INTERVAL_MS = 1_000;

// Routing (lib/fleet/): the registry's own durations are in lib/registry/durations.ts.

/**
 * Owners read this recently are used as they are; a dial that finds them older starts a re-read
 * in the background and goes on with what it has. Bounds how long a moved agent is looked for
 * in the wrong place (a "not here" answer also re-reads at once), and how often a tenant being
 * dialed costs a read: once per this interval per instance, however many dials.
 */
export const ROUTE_FRESH_MS = 5_000;

/**
 * "No agent anywhere" is trusted this long; after that, a dial waits for a re-read rather than
 * failing on old news (an agent that connected a moment ago elsewhere). At most one read a
 * second per agentless tenant per instance, however hard its kube-apiserver dials.
 */
export const ROUTE_NEGATIVE_FRESH_MS = 1_000;

/** A tenant not dialed here for this long is forgotten (and no longer re-read). */
export const ROUTE_IDLE_MS = 60_000;

/** How long a dial may wait for the registry before it fails as "no agent" (503). */
export const ROUTE_READ_TIMEOUT_MS = 3_000;

/**
 * While the registry cannot be read, routing asks the live peers whether they hold a tenant's
 * agents (peer-probe.ts). A peer in the same region answers in a millisecond; one silent this
 * long is not going to help this dial.
 */
export const ROUTE_PROBE_TIMEOUT_MS = 1_000;

/**
 * Peers' answers are used this long, as a registry read is (ROUTE_FRESH_MS): a tenant's dials
 * during an outage cost one probe per interval per instance, however many dials.
 */
export const ROUTE_PROBE_FRESH_MS = ROUTE_FRESH_MS;

/**
 * A routing read not answered this long has the peers asked beside it (owner-lookup.ts): a
 * DynamoDB Query answers in milliseconds, so one silent for half a second is likely hung, and a
 * dial should not wait out ROUTE_READ_TIMEOUT_MS for it when a peer can say where the agents are.
 */
export const ROUTE_PROBE_AFTER_MS = 500;

/**
 * After a routing read fails or times out, the registry counts as down this long: dials ask the
 * peers at once instead of each waiting ROUTE_READ_TIMEOUT_MS on a hung registry (the leases'
 * reads, every heartbeat, say so for as long as they fail).
 */
export const ROUTE_REGISTRY_DOWN_MS = ROUTE_FRESH_MS;

/** "No peer has one" is trusted this long: at most one probe a second per agentless tenant. */
export const ROUTE_PROBE_NEGATIVE_FRESH_MS = ROUTE_NEGATIVE_FRESH_MS;

/**
 * Peers asked at once by one probe: a fleet is a handful of instances; a larger one is asked in
 * waves, so a probe never opens more than this many streams at a time.
 */
export const ROUTE_PROBE_MAX_IN_FLIGHT = 8;

// Peer links (lib/fleet/peer/). Peers are instances of one fleet in one region: round trips are
// well under a millisecond, and a peer that does not answer within a few seconds is gone, not
// slow.

/**
 * TCP connect plus TLS handshake to a peer. Longer than a healthy peer ever needs (a few ms), so
 * that a busy one is not written off; short enough that dials queued behind a dead address fail
 * over quickly.
 */
export const PEER_CONNECT_TIMEOUT_MS = 3_000;

/**
 * How long a peer whose link failed (connect, TLS, GOAWAY, a dead link) is first avoided:
 * `isHealthy` says false and dials fail at once with PeerUnavailableError, so routing picks
 * another owner instead of every dial paying the connect timeout. Short, since most failures are
 * a restart or a blip; after it, the next dial tries again.
 */
export const PEER_FAILURE_BACKOFF_BASE_MS = 500;

/**
 * Each further failure in a row doubles the avoidance, up to this: a peer that stays down costs
 * each instance one connect attempt every few seconds (its lease expiring drops it from routing).
 */
export const PEER_FAILURE_BACKOFF_MAX_MS = 5_000;

/**
 * Each backoff is drawn from [1 - this, 1] of its ceiling, so the instances of a fleet do not
 * retry a recovering peer in lockstep.
 */
export const PEER_FAILURE_BACKOFF_JITTER = 0.5;

/**
 * Keepalive of a peer connection: a PING this often, and the connection is closed (its tunnels
 * broken, the peer marked failing) when one goes unanswered this long. A peer killed without a
 * FIN or RST (its host gone) is noticed within the sum; one that resets the connection at once.
 */
export const PEER_KEEPALIVE_MS = 5_000;
export const PEER_KEEPALIVE_TIMEOUT_MS = 5_000;

/**
 * Dead-peer watch while writing (lib/transport/http2-peer-watch.ts): a link that wrote and heard
 * nothing for half a second is checked, and one whose PING goes unanswered this long is closed.
 */
export const PEER_WATCH_ANSWER_MS = PEER_KEEPALIVE_TIMEOUT_MS;

/**
 * How long a forwarded dial waits for the owner's DIAL_RSP beyond the owner's own dial timeout
 * (the owner answers a timeout itself, with its reason; this only catches an owner that answers
 * nothing at all).
 */
export const PEER_DIAL_TIMEOUT_MARGIN_MS = 2_000;

/**
 * How long a forwarded dial waits for the owner's answer, given --backend-dial-timeout (which
 * every instance of a fleet shares, and the owner applies): that plus the margin; 0 (no
 * timeout) stays 0, as on one instance.
 */
export function peerDialTimeoutMs(backendDialTimeoutMs: number): number {
  return backendDialTimeoutMs > 0 ? backendDialTimeoutMs + PEER_DIAL_TIMEOUT_MARGIN_MS : 0;
}

/**
 * Per-stream HTTP/2 window of a peer link, each direction: one tunnel per stream, so this is
 * what one stalled reader can hold in memory at the receiving instance, and the most a tunnel
 * has in flight per round trip (16 MiB: far beyond in-region round trips, the same as every
 * other HTTP/2 stream of the gateway).
 */
export const PEER_STREAM_WINDOW_BYTES = HTTP2_STREAM_WINDOW_BYTES;

/**
 * Connection window of the client end. Node returns connection-level credit as soon as a frame
 * arrives (a paused stream holds only its own stream window), so a stalled tunnel never starves
 * the others; this only bounds the whole link's bytes in flight per round trip.
 */
export const PEER_CONNECTION_WINDOW_BYTES = 4 * PEER_STREAM_WINDOW_BYTES;

/**
 * Bytes queued on one tunnel's stream before the sender is told to back off: a quarter of a
 * credit window, the same as a frontend call's (lib/transport/grpc/call-stream.ts).
 */
export const PEER_STREAM_HIGH_WATER_BYTES = 512 * 1024;

/** Largest gRPC message taken from a peer: the same 16 MiB as from any other gRPC peer. */
export const PEER_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

/**
 * The status API (lib/server/status/): what a tenant did recently is kept in per-minute buckets
 * over this window, long enough to see a failure an operator was told about a few minutes ago,
 * short enough that the ring stays a handful of small maps per tenant.
 */
export const STATUS_WINDOW_MS = 15 * 60_000;
/** The width of one bucket of that window: the resolution of "dials in the last minutes". */
export const STATUS_BUCKET_MS = 60_000;
/**
 * How long a peer may take to send its slice of the fleet's status. A live peer answers from
 * memory in milliseconds; a peer that has not answered in two seconds is reported as not
 * answering ("timeout") rather than holding the operator's request.
 */
export const PEER_STATUS_TIMEOUT_MS = 2_000;
/**
 * Peers asked for their status at once: a fleet of dozens answers within a few timeouts while
 * one request never opens more than this many streams.
 */
export const PEER_STATUS_MAX_IN_FLIGHT = 8;
/**
 * An instance whose lease the sweeper removed is still listed (lease "gone") this long after it
 * was last seen in a lease read: a kill -9 must show as a dead instance, not vanish from the view.
 */
export const STATUS_GONE_REMEMBER_MS = 10 * 60_000;
/**
 * A tenant's `GET /v1/status` on the gateway port, from the parsed head to the answer: the
 * fleet's answer waits at most PEER_STATUS_TIMEOUT_MS for peers, so this is a bound that only a
 * stuck process reaches.
 */
export const SELF_STATUS_ANSWER_TIMEOUT_MS = 5_000;
/** After that answer, how long a client may take to read it and close before it is cut off. */
export const SELF_STATUS_LINGER_MS = 5_000;
/**
 * How often the admin port's status page reloads itself (`<meta http-equiv="refresh">`): often
 * enough to watch an agent move to another instance, rarely enough that a page left open on a
 * wall screen asks the fleet (each peer over its link) a few times a minute, not every second.
 */
export const STATUS_PAGE_REFRESH_SECONDS = 10;

/**
 * How long the last metrics set for CloudWatch (lib/server/metrics-emf.ts) may take to reach
 * stdout at shutdown: a few KiB; past this the log router is stuck and waiting helps nobody.
 */
export const EMF_CLOSE_TIMEOUT_MS = 2_000;
