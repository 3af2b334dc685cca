/**
 * The audit record of one dial: who asked (tenant, principal, listener, frontend), where it went
 * (destination, agent, instance), how it ended (outcome, error code) and what it carried (bytes
 * each way, dial latency, duration). One per dial, written when its tunnel ends or its dial fails.
 *
 * A record is built from the fields named here and nothing else (never from a request, its
 * headers or a credential object), so a secret cannot reach it by accident. Strings a peer chose
 * are cut to a length and cleaned of control characters, so a record has a size bound
 * (AUDIT_RECORD_MAX_BYTES) whatever the peer sent.
 */
import type { ErrorCode } from "../../errors.js";
import type { CallerIdentity, CallerListener, FrontendKind } from "../core/dial-context.js";

/**
 * How a dial ended, for people and for the `outcome` label of kgw_tenant_dials_total:
 *  - ok: the tunnel was established and closed normally (by either side);
 *  - broken: the tunnel was established and then broke (agent gone, backend error, protocol);
 *  - drained: a drain ended it (the gateway's drain ran out with it open, or its agent drained):
 *    a rollout, not a failure, so the dial-failure alarm does not count it;
 *  - refused: the agent could not connect to the destination (refused, unreachable, DNS: 502);
 *  - denied: policy said no (authorization, the agent's destination policy, quota);
 *  - unavailable: no agent could take it (none connected or answering, agent gone, shutting down);
 *  - timeout: no answer in time (ours or the agent's connect timeout);
 *  - cancelled: the caller gave up before the answer;
 *  - failed: anything else (a protocol error, an internal error).
 */
export type DialOutcome =
  | "ok"
  | "broken"
  | "drained"
  | "refused"
  | "denied"
  | "unavailable"
  | "timeout"
  | "cancelled"
  | "failed";

export const DIAL_OUTCOMES: readonly DialOutcome[] = [
  "ok",
  "broken",
  "drained",
  "refused",
  "denied",
  "unavailable",
  "timeout",
  "cancelled",
  "failed",
];

/** The outcome of a dial that failed before its tunnel was established, by error code. */
const DIAL_FAILURE_OUTCOME: Record<ErrorCode, DialOutcome> = {
  ERR_CONFIG: "failed",
  ERR_BAD_REQUEST: "failed",
  ERR_METHOD_NOT_ALLOWED: "failed",
  ERR_HEADERS_TOO_LARGE: "failed",
  ERR_HEADERS_TIMEOUT: "failed",
  ERR_UNAUTHENTICATED: "denied",
  ERR_PROXY_AUTH_REQUIRED: "denied",
  ERR_FORBIDDEN: "denied",
  ERR_QUOTA: "denied",
  ERR_NO_AGENT: "unavailable",
  ERR_AGENT_GONE: "unavailable",
  ERR_DIAL_FAILED: "refused",
  ERR_DIAL_TIMEOUT: "timeout",
  ERR_DIAL_CANCELLED: "cancelled",
  ERR_DESTINATION_NOT_ALLOWED: "denied",
  ERR_CONNECTION_BROKEN: "failed",
  ERR_UNKNOWN_CONNECTION: "failed",
  ERR_PROTOCOL: "failed",
  ERR_UNSUPPORTED: "failed",
  ERR_MESSAGE_TOO_LARGE: "failed",
  ERR_DEADLINE_EXCEEDED: "timeout",
  ERR_SHUTTING_DOWN: "unavailable",
  ERR_DRAINED: "drained",
  ERR_SERVER_CONNECT: "failed",
  ERR_NOT_FOUND: "failed",
  ERR_ALREADY_EXISTS: "failed",
  ERR_ALREADY_REVOKED: "failed",
  ERR_CONFLICT: "failed",
  ERR_STORE_CORRUPT: "failed",
  ERR_STORE_UNAVAILABLE: "unavailable",
  ERR_INTERNAL: "failed",
};

/** Outcome of a dial that failed with `code` (null: not one of our typed errors). */
export function dialFailureOutcome(code: ErrorCode | null): DialOutcome {
  return code === null ? "failed" : DIAL_FAILURE_OUTCOME[code];
}

/** Outcome of an established tunnel that ended with `code` (null: closed normally). */
export function tunnelEndOutcome(code: ErrorCode | null): DialOutcome {
  if (code === null) return "ok";
  return code === "ERR_DRAINED" ? "drained" : "broken";
}

/**
 * Longest destination kept: a DNS name (253) with a port and IPv6 brackets fits. A CONNECT
 * target may be as long as --max-header-bytes and a gRPC DIAL_REQ address up to 16 MiB.
 */
export const AUDIT_DESTINATION_MAX_CHARS = 256;
/**
 * Longest principal, agent ID, instances, dial id and tenant kept. Ours are far shorter
 * ("token:" and 16 hex digits; a certificate's CN and a 40-digit serial; a UUID); an agent ID
 * or a CN is the peer's.
 */
export const AUDIT_NAME_MAX_CHARS = 128;
/**
 * Longest rule and quota kept: ours are fixed labels of at most 14 characters (judge.ts's rules,
 * lib/tenancy/quotas.ts's names); the cut only keeps the bound below true whatever they become.
 */
export const AUDIT_LABEL_MAX_CHARS = 32;
/**
 * Every record, serialized as one JSON line, is at most this long: with the cuts above and every
 * character at most 3 bytes of UTF-8 (controls and lone surrogates are replaced, never escaped),
 * the strings take at most 3 KiB, and the two labels 192 bytes. At or under PIPE_BUF (4096 on Linux) one write of a record
 * to a pipe is atomic, so records on stdout are never interleaved with the server log's lines.
 */
export const AUDIT_RECORD_MAX_BYTES = 4096;

export interface DialAuditRecord {
  /** When the record was written (the tunnel ended or the dial failed), ISO 8601 UTC. */
  time: string;
  /**
   * The dial's id, made where the dial arrived and carried over a peer hop: the owner's log lines
   * about a forwarded dial name it too.
   */
  dialId: string;
  tenant: string;
  /** "cert:<CN>#<serial>", "token:<id>", "uds" or "anonymous"; never a secret. */
  principal: string;
  listener: CallerListener;
  frontend: FrontendKind;
  /**
   * The server where the caller's dial arrived (--server-id): the origin, which writes the one
   * record of a dial, forwarded or not.
   */
  instance: string;
  /**
   * The server whose agent took the dial: `instance` itself, or the peer it was forwarded to
   * (the last one tried, when none answered); null when it went to none.
   */
  owner: string | null;
  /** null when no agent was chosen (none available, refused by policy first). */
  agentId: string | null;
  /** host:port as the caller asked for it. */
  destination: string;
  outcome: DialOutcome;
  /** The typed error code (lib/errors.ts) when the outcome is not ok; otherwise null. */
  code: ErrorCode | null;
  /**
   * The egress rule that refused the dial (lib/egress/judge.ts's labels: loopback, link_local,
   * no_rule, malformed; no_tenant), when the server's policy refused it; otherwise null.
   */
  rule: string | null;
  /** The quota that refused the dial (maxTunnels, dialsPerSecond, maxBufferedMiB); otherwise null. */
  quota: string | null;
  /** That quota's value for the tenant when it refused; otherwise null. */
  limit: number | null;
  /** Bytes the caller sent into the tunnel (towards the destination). */
  bytesFromCaller: number;
  /** Bytes the destination sent back, handed to the caller. */
  bytesToCaller: number;
  /** From the dial's arrival to the agent's answer (or the failure). */
  dialMs: number;
  /** From the dial's arrival to the record. */
  durationMs: number;
}

/**
 * What a record is built from: the record's own fields, but the end as a time and the caller's
 * whole identity (buildDialRecord reads only its tenant, principal and listener).
 */
export interface DialRecordInput
  extends Omit<DialAuditRecord, "time" | "tenant" | "principal" | "listener" | "rule" | "quota" | "limit">,
    Partial<Pick<DialAuditRecord, "rule" | "quota" | "limit">> {
  /** Epoch milliseconds of the end. */
  endedAt: number;
  caller: CallerIdentity;
}

/**
 * C0 and C1 controls, DEL, and UTF-16 surrogates not in a pair: JSON would escape each as six
 * bytes (\u001b); U+FFFD costs three and keeps terminal escapes out of anyone's `tail`.
 */
const UNSAFE_CHARS =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
  /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** `value` cut to `max` UTF-16 units (the last one "…" when cut) and cleaned for the record. */
export function auditField(value: string, max: number): string {
  let v = value;
  if (v.length > max) {
    let end = max - 1;
    // Never keep half of a surrogate pair.
    const last = v.charCodeAt(end - 1);
    if (last >= 0xd800 && last <= 0xdbff) end--;
    v = `${v.slice(0, end)}…`;
  }
  return v.replace(UNSAFE_CHARS, "\ufffd");
}

/** Milliseconds to a tenth, non-negative. */
const ms = (n: number): number => Math.max(0, Math.round(n * 10) / 10);

/** The record of one dial; reads only the named fields of `input` (never the credential). */
export function buildDialRecord(input: DialRecordInput): DialAuditRecord {
  return {
    time: new Date(input.endedAt).toISOString(),
    dialId: auditField(input.dialId, AUDIT_NAME_MAX_CHARS),
    tenant: auditField(input.caller.tenant, AUDIT_NAME_MAX_CHARS),
    principal: auditField(input.caller.principal, AUDIT_NAME_MAX_CHARS),
    listener: input.caller.listener,
    frontend: input.frontend,
    instance: auditField(input.instance, AUDIT_NAME_MAX_CHARS),
    owner: input.owner === null ? null : auditField(input.owner, AUDIT_NAME_MAX_CHARS),
    agentId: input.agentId === null ? null : auditField(input.agentId, AUDIT_NAME_MAX_CHARS),
    destination: auditField(input.destination, AUDIT_DESTINATION_MAX_CHARS),
    outcome: input.outcome,
    code: input.outcome === "ok" ? null : input.code,
    // Ours, never the peer's: judge.ts's labels and quota names are fixed strings.
    rule: input.rule == null ? null : auditField(input.rule, AUDIT_LABEL_MAX_CHARS),
    quota: input.quota == null ? null : auditField(input.quota, AUDIT_LABEL_MAX_CHARS),
    limit: input.limit ?? null,
    bytesFromCaller: input.bytesFromCaller,
    bytesToCaller: input.bytesToCaller,
    dialMs: ms(input.dialMs),
    durationMs: ms(input.durationMs),
  };
}
