/**
 * The durations of the deployment, derived from the gateway's own defaults so they cannot drift
 * from the code (lib/config). How a task stops on ECS, in order:
 *
 *   1. ECS deregisters the task from both target groups. The NLB stops sending it new flows;
 *      flows already open keep working (connection termination is off).
 *   2. ECS waits until the targets are unused, at most the deregistration delay. Agents keep a
 *      connection open, so in practice it waits the whole delay: the NLB's deregistration has
 *      time to take effect everywhere before the gateway stops listening.
 *   3. ECS sends SIGTERM. The gateway marks itself draining in the registry, stops accepting,
 *      tells agents to reconnect (they land on other tasks: this one is out of the NLB), lets
 *      open tunnels finish for --graceful-shutdown-timeout, releases its lease and exits.
 *   4. ECS sends SIGKILL after the container's stopTimeout, which leaves room for step 3 and the
 *      audit log's flush.
 */
import { AGENT_FLAGS } from "../../lib/config/agent-options.js";
import { SERVER_FLAGS } from "../../lib/config/server-flags.js";

/** Fargate refuses a container stopTimeout above 120 s. */
export const FARGATE_MAX_STOP_TIMEOUT_SECONDS = 120;

/**
 * Time the process needs after the grace period: the audit log's flush (at most 5 s,
 * lib/server/audit/audit-log.ts), releasing the lease (one DynamoDB write) and exiting.
 */
export const STOP_MARGIN_SECONDS = 10;

/**
 * The NLB's bounds for tcp.idle_timeout.seconds. Its default, 350 s, is far below the
 * keepalive of agents and callers (1 h), so an idle tunnel would be cut silently.
 */
export const NLB_MIN_IDLE_TIMEOUT_SECONDS = 60;
export const NLB_MAX_IDLE_TIMEOUT_SECONDS = 6000;

/** Above the longest keepalive by this much, so the ping arrives before the NLB forgets the flow. */
export const IDLE_TIMEOUT_MARGIN_SECONDS = 300;

export interface LifecycleTimings {
  /** Passed to the gateway as --graceful-shutdown-timeout. */
  gracefulShutdownSeconds: number;
  /** The target groups' deregistration delay: equal to the grace period (step 2 above). */
  deregistrationDelaySeconds: number;
  /** The gateway container's stopTimeout: the grace period plus STOP_MARGIN_SECONDS. */
  stopTimeoutSeconds: number;
}

const seconds = (ms: number): number => Math.ceil(ms / 1000);

export function lifecycleTimings(
  gracefulShutdownSeconds = seconds(SERVER_FLAGS["graceful-shutdown-timeout"].default),
): LifecycleTimings {
  const stopTimeoutSeconds = gracefulShutdownSeconds + STOP_MARGIN_SECONDS;
  if (stopTimeoutSeconds > FARGATE_MAX_STOP_TIMEOUT_SECONDS) {
    throw new RangeError(
      `a graceful shutdown of ${gracefulShutdownSeconds}s does not fit in Fargate's stop timeout: at most ${FARGATE_MAX_STOP_TIMEOUT_SECONDS - STOP_MARGIN_SECONDS}s`,
    );
  }
  return { gracefulShutdownSeconds, deregistrationDelaySeconds: gracefulShutdownSeconds, stopTimeoutSeconds };
}

/**
 * The TCP listener's idle timeout: above every keepalive that crosses the NLB. Agents are also
 * probed by the gateway after 5 s of silence, but a CONNECT tunnel carries only its caller's
 * bytes, and kube-apiserver's `kubectl logs -f` or an idle exec session can be silent for long.
 */
export function tcpIdleTimeoutSeconds(): number {
  const longestKeepaliveMs = Math.max(
    SERVER_FLAGS["keepalive-time"].default,
    SERVER_FLAGS["frontend-keepalive-time"].default,
    AGENT_FLAGS["keepalive-time"].default,
  );
  const wanted = seconds(longestKeepaliveMs) + IDLE_TIMEOUT_MARGIN_SECONDS;
  return Math.min(NLB_MAX_IDLE_TIMEOUT_SECONDS, Math.max(NLB_MIN_IDLE_TIMEOUT_SECONDS, wanted));
}
