/**
 * Routing's durations, each with its reason. The registry's own (heartbeats, leases, sweeps) are
 * in lib/registry/durations.ts.
 */

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

/**
 * Instances an agent is asked to hold streams to (serverCount), capped by the instances alive:
 * with two, a tenant survives losing either instance with no failed dial but those in flight.
 */
export const DEFAULT_AGENT_REDUNDANCY = 2;
