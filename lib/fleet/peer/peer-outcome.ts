/**
 * How the owner tells the forwarding instance why a dial failed: a DIAL_RSP carries the error
 * text, as upstream's does, plus our extension field `failure` (DialResponse field 100,
 * lib/proto/codec.ts), which only peer links ever carry:
 *
 * - `not-here`: the owner has no agent of the tenant (its registry's NoAgentError). Routing's
 *   view is stale: it re-reads the owners and retries once (PeerNotHereError).
 * - an ErrorCode of lib/errors.ts: the dial failed there for that reason (egress policy, quota,
 *   the agent's answer, a timeout...). The forwarding instance reports the same code to its
 *   caller, so a CONNECT through a peer hop gets the status it would get on one instance.
 *   ERR_SHUTTING_DOWN (the owner is draining) becomes PeerUnavailableError: try another owner.
 *
 * Without the field (an older peer), the text is typed as an agent's answer is (agentDialError).
 */
import {
  agentDialError,
  ConnectionBrokenError,
  DrainedError,
  type ErrorCode,
  GatewayError,
  NoAgentError,
  PeerNotHereError,
  PeerUnavailableError,
} from "../../errors.js";

export const NOT_HERE = "not-here";

/**
 * The codes a dial can fail with and a peer may report; anything else on the wire is read as a
 * failed dial (ERR_DIAL_FAILED) rather than trusted as a code.
 */
const DIAL_FAILURE_CODES: ReadonlySet<string> = new Set<ErrorCode>([
  "ERR_UNAUTHENTICATED",
  "ERR_FORBIDDEN",
  "ERR_QUOTA",
  "ERR_NO_AGENT",
  "ERR_AGENT_GONE",
  "ERR_DIAL_FAILED",
  "ERR_DIAL_TIMEOUT",
  "ERR_DIAL_CANCELLED",
  "ERR_DESTINATION_NOT_ALLOWED",
  "ERR_BAD_REQUEST",
  "ERR_PROTOCOL",
  "ERR_SHUTTING_DOWN",
]);

/** The `failure` field for a dial that failed at the owner with `err`. */
export function failureOf(err: GatewayError, notHere: boolean): string {
  return notHere ? NOT_HERE : err.code;
}

/**
 * Whether the owner's dial failed because it has no agent of the tenant: its local registry
 * threw NoAgentError before anything was sent (an agent that answers "too many open files" is
 * also ERR_NO_AGENT, but answers later, through dialFailed, and is not "not here").
 */
export function isNotHere(err: unknown): boolean {
  return err instanceof NoAgentError;
}

/** The error a forwarded dial failed with, from the owner's DIAL_RSP. */
export function peerDialFailure(peer: string, error: string, failure: string | undefined): GatewayError {
  const text = error || "dial failed at the peer";
  if (failure === undefined) return agentDialError(text);
  if (failure === NOT_HERE) return new PeerNotHereError(peer, text);
  if (failure === "ERR_SHUTTING_DOWN") return new PeerUnavailableError(peer, "draining");
  if (!DIAL_FAILURE_CODES.has(failure)) return agentDialError(text);
  return new GatewayError(failure as ErrorCode, text);
}

/**
 * The `failure` field of a forwarded tunnel's CLOSE_RSP: only a drain is told apart (ERR_DRAINED),
 * so the forwarding instance audits it as drained; any other end with an error is a break there.
 */
export function tunnelEndFailure(err: GatewayError | undefined): string | undefined {
  return err?.code === "ERR_DRAINED" ? err.code : undefined;
}

/** How a forwarded tunnel ended, from the owner's CLOSE_RSP: clean, drained, or broken. */
export function peerTunnelEnd(
  peer: string,
  error: string,
  failure: string | undefined,
): GatewayError | undefined {
  if (failure === "ERR_DRAINED") return new DrainedError(`peer instance ${peer}: ${error || "drained"}`);
  return error ? new ConnectionBrokenError(error) : undefined;
}
