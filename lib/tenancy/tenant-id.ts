/**
 * Tenant ids: lower-case DNS labels (RFC 1123), the same rule Kubernetes applies to namespace
 * names. An id is used as a file name, a DynamoDB key, part of a URI SAN and part of every
 * token, so the alphabet is small on purpose: nothing in it needs quoting or escaping anywhere.
 */
import { InvalidTenantInputError } from "./errors.js";
import { MAX_TENANT_ID_LENGTH } from "./limits.js";

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * Ids no tenant may take. "default" is the implicit tenant of the drop-in single-tenant mode
 * (lib/server/agent-auth.ts): a stored tenant of that name would be confused with it in logs,
 * metrics and audit records.
 */
const RESERVED_IDS: ReadonlySet<string> = new Set(["default"]);

export function isValidTenantId(id: unknown): id is string {
  return (
    typeof id === "string" && id.length <= MAX_TENANT_ID_LENGTH && DNS_LABEL.test(id) && !RESERVED_IDS.has(id)
  );
}

/** Returns `id` if it is a valid tenant id; the error quotes at most a short prefix of it. */
export function checkTenantId(id: unknown): string {
  if (isValidTenantId(id)) return id;
  if (typeof id === "string" && RESERVED_IDS.has(id)) {
    throw new InvalidTenantInputError(`tenant id "${id}" is reserved`);
  }
  throw new InvalidTenantInputError(
    `invalid tenant id ${preview(id)}: use 1-${MAX_TENANT_ID_LENGTH} lower-case letters, digits and '-', starting and ending with a letter or digit`,
  );
}

/** A bounded, escaped rendering of untrusted input for error messages (no terminal escapes). */
export function preview(value: unknown): string {
  if (typeof value !== "string") return typeof value;
  const short = value.length > 40 ? `${value.slice(0, 40)}…` : value;
  // JSON escapes C0 controls; DEL, C1 controls (a lone 0x9b is a CSI on some terminals) and the
  // Unicode line separators are escaped here too.
  return JSON.stringify(short).replace(
    /[\u007f-\u009f\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
