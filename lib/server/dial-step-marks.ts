/**
 * The gateway's marks of a dial's steps (lib/observability/dial-steps.ts), put around the seams a
 * dial crosses rather than into the gateway's dial path: the policy's authorizeDial ends "policy";
 * the directory's dial starts once the quota is taken (ends "quota") and returns once an agent was
 * chosen and asked (ends "routing"). The audit tracker marks "audit" itself. Without
 * --dial-step-metrics nothing is wrapped: the dial path is the same code as before.
 */
import { afterStep } from "../observability/dial-steps.js";
import type { AgentDirectory } from "./core/dial-context.js";
import type { GatewayPolicy } from "./policy/gateway-policy.js";

/** `policy` with "policy" marked after each dial is authorized, when `on`. */
export function markPolicyStep(policy: GatewayPolicy, on: boolean): GatewayPolicy {
  if (!on) return policy;
  return {
    ...policy,
    authorizeDial: (ctx, req) => afterStep(ctx.steps, "policy", policy.authorizeDial(ctx, req)),
  };
}

/** `directory` with "quota" marked as a dial reaches it and "routing" as it leaves, when `on`. */
export function markRoutingSteps(directory: AgentDirectory, on: boolean): AgentDirectory {
  if (!on) return directory;
  return {
    dial: (ctx, req, frontend) => {
      ctx.steps?.mark("quota");
      return afterStep(ctx.steps, "routing", directory.dial(ctx, req, frontend));
    },
  };
}
