/**
 * The local tools' fixed durations (`npm run fleet:local`'s load balancer), each with its reason.
 * They mirror the NLB the hosted deployment puts in front of the gateway (cdk/), scaled down so
 * that a failover shows on one machine within a couple of seconds rather than half a minute.
 */

/**
 * How often the balancer asks each instance's health endpoint. The NLB checks every 10 s; a
 * local fleet is for watching an instance go, so twice a second.
 */
export const BALANCER_CHECK_INTERVAL_MS = 500;

/**
 * How long one health check may take. A loopback /readyz answers in a millisecond; an instance
 * that takes longer is frozen or gone, and a check must end before the next one is due.
 */
export const BALANCER_CHECK_TIMEOUT_MS = 400;

/**
 * Checks in a row that change a target's state (the NLB's healthy and unhealthy thresholds,
 * 2 to 10; the lowest): one lost check is not a dead instance, two are.
 */
export const BALANCER_THRESHOLD = 2;

/**
 * How long the balancer waits for an instance to accept a TCP connection before trying the next
 * one. Loopback accepts or refuses at once; a listen queue that is full is a stuck instance.
 */
export const BALANCER_CONNECT_TIMEOUT_MS = 2_000;

/**
 * How long fleet:local gives a process to start and announce itself: a cold `node`, and for an
 * instance its first lease written to DynamoDB (dynalite here) and its listeners bound.
 */
export const LOCAL_START_MS = 30_000;

/**
 * How long fleet:local's agent may take to hold streams to the surviving instances after one is
 * killed: its stream breaks at once, it reconnects with backoff (lib/agent/durations.ts) and the
 * balancer takes the dead instance out after two checks.
 */
export const LOCAL_AGENT_MOVE_MS = 30_000;

/**
 * How long fleet:local's instances get to leave the fleet on SIGTERM (drain, agents moved, lease
 * released) before they are killed: with no dials open that takes about a second.
 */
export const LOCAL_STOP_MS = 15_000;

/** How often fleet:local polls an endpoint or a --ports-file it is waiting on. */
export const LOCAL_POLL_MS = 100;
