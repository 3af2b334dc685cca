/**
 * Tenant mode's dial authorizer: the caller's tenant's egress policy (lib/egress), judged on the
 * target as asked for, before anything reaches an agent, so that it holds for upstream's
 * proxy-agent as for ours. An allowed dial leaves with the policy attached in its wire form, for
 * our agents to judge the addresses the name resolves to (they alone see them).
 */
import { egressWireText } from "../../egress/egress-wire.js";
import { compileEgressPolicy } from "../../egress/judge.js";
import { hostText, parseTargetAddress } from "../../egress/target.js";
import { BadRequestError, DESTINATION_NOT_ALLOWED, DestinationNotAllowedError } from "../../errors.js";
import type { TenantLookup } from "../../tenancy/verify.js";
import type { DialAuthorizer } from "./gateway-policy.js";

export interface EgressAuthorizerOptions {
  lookup: TenantLookup;
  /** Told of every refusal, by the rule that refused it (for metrics). */
  refused(rule: string): void;
}

export function egressAuthorizer(o: EgressAuthorizerOptions): DialAuthorizer {
  return (ctx, req) => {
    const record = o.lookup(ctx.caller.tenant);
    // The caller authenticated against this record moments ago; if it is gone since, the
    // revocation that follows closes the caller: refuse rather than guess a policy.
    if (record?.state !== "active") {
      o.refused("no_tenant");
      throw new DestinationNotAllowedError(
        `${DESTINATION_NOT_ALLOWED}: tenant ${ctx.caller.tenant} is gone`,
        "no_tenant",
      );
    }
    // The same reading of the target as the CONNECT parser's (lib/egress/target.ts), so that a
    // gRPC or forwarded dial cannot spell past the policy what CONNECT refuses.
    if (req.protocol !== "tcp") throw new BadRequestError(`dial ${quoted(req.protocol)}: unknown network`);
    const parsed = parseTargetAddress(req.address);
    if (!parsed.ok) throw new BadRequestError(`dial tcp ${quoted(req.address)}: ${parsed.reason}`);
    const { host, port } = parsed.value;
    const verdict = compileEgressPolicy(record.egress).judgeTarget(hostText(host), port);
    if (!verdict.allowed) {
      o.refused(verdict.rule);
      throw new DestinationNotAllowedError(`${DESTINATION_NOT_ALLOWED}: ${verdict.reason}`, verdict.rule);
    }
    return { ...req, egress: egressWireText(record.egress) };
  };
}

/** The caller's own address, bounded: it goes back to the caller and into the log. */
function quoted(address: string): string {
  return JSON.stringify(address.length > 80 ? `${address.slice(0, 80)}…` : address);
}
