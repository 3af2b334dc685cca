/**
 * The server's fixed durations and sizes, each with its reason. Durations an operator may need to
 * change are flags instead (lib/config/server-options.ts); these are the ones that follow from the
 * protocol or from measurement.
 */

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

/** Sources the refusal throttle remembers at once (about 100 bytes each). */
export const REFUSAL_THROTTLE_MAX_SOURCES = 10_000;

/**
 * Periodic liveness probes an instance sends a second, all agents together (agent-liveness.ts).
 * Each costs about 45 µs (an HTTP/2 or kgw-tunnel/1 PING through TLS, measured in the `scale`
 * scenario): up to 1,000 agents probed every 5 s stay within it, and past that the probes of
 * idle agents spread out instead of idle CPU growing with the number of agents (about 9 ms of
 * CPU a second at most).
 */
export const IDLE_PROBES_PER_SECOND = 200;

/** While shutting down, how often to check whether open tunnels have finished. */
export const DRAIN_POLL_MS = 100;

/**
 * While shutting down, at least this long is given to connections accepted just before the
 * listeners closed: their handshake and first request take milliseconds, and a dial they bring is
 * served, not cut off (a rolling restart must fail no dial).
 */
export const DRAIN_SETTLE_MS = 500;

/** Largest gRPC message accepted from a peer (upstream's servers take 16 MiB DATA packets too). */
export const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;
