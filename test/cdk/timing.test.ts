import { describe, expect, it } from "vitest";
import {
  FARGATE_MAX_STOP_TIMEOUT_SECONDS,
  lifecycleTimings,
  NLB_MAX_IDLE_TIMEOUT_SECONDS,
  tcpIdleTimeoutSeconds,
} from "../../cdk/lib/timing.js";
import { AGENT_FLAGS } from "../../lib/config/agent-options.js";
import { SERVER_FLAGS } from "../../lib/config/server-flags.js";

describe("the deployment's durations", () => {
  it("follow the server's --graceful-shutdown-timeout, within Fargate's stop timeout", () => {
    const t = lifecycleTimings();
    expect(t.gracefulShutdownSeconds * 1000).toBe(SERVER_FLAGS["graceful-shutdown-timeout"].default);
    expect(t.deregistrationDelaySeconds).toBe(t.gracefulShutdownSeconds);
    expect(t.stopTimeoutSeconds).toBeGreaterThan(t.gracefulShutdownSeconds);
    expect(t.stopTimeoutSeconds).toBeLessThanOrEqual(FARGATE_MAX_STOP_TIMEOUT_SECONDS);
  });

  it("refuse a grace period the stop timeout cannot hold", () => {
    expect(lifecycleTimings(110).stopTimeoutSeconds).toBe(120);
    expect(() => lifecycleTimings(111)).toThrow(/at most 110s/);
  });

  it("keep the NLB's idle timeout above every keepalive that crosses it", () => {
    const idle = tcpIdleTimeoutSeconds();
    for (const ms of [
      SERVER_FLAGS["keepalive-time"].default,
      SERVER_FLAGS["frontend-keepalive-time"].default,
      AGENT_FLAGS["keepalive-time"].default,
    ]) {
      expect(idle * 1000).toBeGreaterThan(ms);
    }
    expect(idle).toBeLessThanOrEqual(NLB_MAX_IDLE_TIMEOUT_SECONDS);
  });
});
