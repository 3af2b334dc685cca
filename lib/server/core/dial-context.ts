/**
 * What the gateway knows about a dial before it reaches an agent: who is asking. Built once, when
 * the caller's connection (gRPC) or request (CONNECT) is accepted, by the caller authenticator;
 * every policy after that (dial authorization, and later egress policy, quota and audit) reads it
 * instead of looking at sockets again.
 */
import type { GatewayError } from "../../errors.js";
import type { DialSteps } from "../../observability/dial-steps.js";
import type { DialHandle, DialRequest, FrontendEnd } from "../../tunnel/endpoints.js";
import type { WindowBudget } from "../../tunnel/flow-control.js";

/**
 * "tcp" and "uds" are the frontend's listeners; "gateway" is the agent port serving every role
 * (tenant mode).
 */
export type CallerListener = "tcp" | "uds" | "gateway";

/**
 * The credential a peer authenticated with, when it can stop being valid while the peer's
 * streams are open (a tenant credential revoked or expired, its tenant deleted). Opaque here:
 * the policy that issued it knows how to check it again; the key names the credential (the same
 * credential on many connections has one key).
 */
export interface CredentialRef {
  readonly key: string;
}

/**
 * Registers `close` for as long as something opened with `credential` is open; the policy calls
 * it if the credential stops being valid. Returns the function that unregisters it (call it when
 * the stream or tunnel ends). A peer with no revocable credential (undefined) registers nothing.
 */
export type CredentialHold = (
  credential: CredentialRef | undefined,
  close: (err: GatewayError) => void,
) => () => void;

export interface CallerIdentity {
  /** The tenant whose agents this caller may reach. */
  readonly tenant: string;
  /**
   * Who the caller is, for logs and audit; never a secret: "cert:<CN>#<serial>", "token:<id>",
   * "uds" (the Unix socket's file permissions vouch for it) or "anonymous" (allowed by a flag).
   */
  readonly principal: string;
  readonly listener: CallerListener;
  readonly credential?: CredentialRef;
  /** The tenant credentials shown ("token:<id>", "cert:<serial>"): the status API's last use. */
  readonly credentialIds?: readonly string[];
}

/** How the caller reached us: a ProxyService.Proxy stream or an HTTP CONNECT tunnel. */
export type FrontendKind = "grpc" | "connect";

/**
 * Told where one dial went, for its audit record (lib/server/audit/): the directory calls it once
 * it has chosen an agent, before sending the dial, so that a dial that fails at once is recorded
 * with its agent too.
 */
export interface DialObserver {
  /** `agentId` took the dial, on instance `owner` (absent: this one). */
  routed(agentId: string, owner?: string): void;
  /** The dial went over a peer link to instance `owner`, which has not said which agent yet. */
  forwarded?(owner: string): void;
}

export interface DialContext {
  readonly caller: CallerIdentity;
  readonly frontend: FrontendKind;
  /**
   * The dial's id, the same on every instance it crosses: made where the caller's dial arrived
   * (its audit record's `dialId`), carried over a peer hop, so that what the owner logs about
   * it joins that record.
   */
  readonly dialId?: string;
  /**
   * Set on a dial another instance forwarded here: that instance's id. The origin writes the
   * dial's one audit record and counts it in its tenant's metrics; the owner does neither.
   */
  readonly origin?: string;
  /** Set per dial by the gateway; absent where nobody audits (tests of the core). */
  readonly observer?: DialObserver;
  /**
   * Where the connection's receive window above the protocol's initial one comes from: the
   * tenant's budget of bytes in flight (set per dial by the gateway; absent: no budget).
   */
  readonly windowBudget?: WindowBudget;
  /** This dial's step clock, with --dial-step-metrics (a CONNECT dial's; lib/observability/dial-steps.ts). */
  readonly steps?: DialSteps;
}

/** How a frontend reaches agents: authorization, then the agent directory (or a peer, later). */
export type Dialer = (ctx: DialContext, req: DialRequest, frontend: FrontendEnd) => DialHandle;

/** A Dialer bound to one caller: what a frontend session or CONNECT socket holds. */
export type CallerDialer = (req: DialRequest, frontend: FrontendEnd) => DialHandle;

export function bindDialer(dialer: Dialer, ctx: DialContext): CallerDialer {
  return (req, frontend) => dialer(ctx, req, frontend);
}

/** Where a tenant's agents are: the local registry today; the fleet puts remote owners behind it. */
export interface AgentDirectory {
  /**
   * Sends the dial to an agent of the caller's tenant; throws a GatewayError (NoAgentError) when
   * none serves it.
   */
  dial(ctx: DialContext, req: DialRequest, frontend: FrontendEnd): DialHandle;
}
