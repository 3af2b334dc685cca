/**
 * The egress policy on the wire: our server attaches its tenant's policy to every DIAL_REQ it
 * sends to an agent that asked for it in its metadata (EGRESS_HEADER), as JSON in an extension
 * field of DialRequest that upstream agents are never sent. Per dial rather than pushed once:
 * the agent then judges each dial by exactly the policy the server judged it by, a change in
 * the store takes effect on the next dial, and there is no state to keep in step across
 * reconnects and transports. A policy is a few hundred bytes; a dial is far dearer.
 *
 * The agent parses what it receives as untrusted input (bounded, validated) and keeps the last
 * few compiled policies by their text, so a steady policy is parsed once.
 */
import { ProtocolError } from "../errors.js";
import { type EgressPolicy, EgressRuleError, validateEgressPolicy } from "./egress-policy.js";
import { type CompiledEgress, compileEgressPolicy } from "./judge.js";

/** Agent metadata (and the server's answer): the agent judges dials by the policy they carry. */
export const EGRESS_HEADER = "kgw-egress-policy";
export const EGRESS_V1 = "v1";

/** Far above any policy of MAX_EGRESS_RULES rules of sane length, far below a packet's limit. */
export const MAX_EGRESS_WIRE_BYTES = 48 * 1024;

const texts = new WeakMap<EgressPolicy, string>();

/** The JSON our server sends; cached per policy object (records are immutable). */
export function egressWireText(policy: EgressPolicy): string {
  let t = texts.get(policy);
  if (t === undefined) {
    t = JSON.stringify({
      allow: policy.allow,
      allowLoopback: policy.allowLoopback,
      allowLinkLocal: policy.allowLinkLocal,
    });
    texts.set(policy, t);
  }
  return t;
}

/** Parses and compiles policies received in DIAL_REQs; the last `size` distinct ones are kept. */
export class EgressCache {
  private readonly byText = new Map<string, CompiledEgress>();

  constructor(private readonly size = 8) {}

  /** Throws ProtocolError for a policy that is not one: the dial is refused, not let through. */
  get(text: string): CompiledEgress {
    const hit = this.byText.get(text);
    if (hit) {
      // Most recently used last, so the oldest is first to go.
      this.byText.delete(text);
      this.byText.set(text, hit);
      return hit;
    }
    const compiled = compileEgressPolicy(parseWire(text));
    this.byText.set(text, compiled);
    if (this.byText.size > this.size) this.byText.delete(this.byText.keys().next().value as string);
    return compiled;
  }
}

function parseWire(text: string): EgressPolicy {
  if (Buffer.byteLength(text) > MAX_EGRESS_WIRE_BYTES)
    throw new ProtocolError(
      `egress policy of ${Buffer.byteLength(text)} bytes is over ${MAX_EGRESS_WIRE_BYTES}`,
    );
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ProtocolError("egress policy is not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new ProtocolError("egress policy is not an object");
  try {
    return validateEgressPolicy(value as EgressPolicy);
  } catch (err) {
    if (err instanceof EgressRuleError) throw new ProtocolError(err.message);
    throw err;
  }
}
