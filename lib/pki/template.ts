import { webcrypto } from "node:crypto";
import type { x509 } from "./x509.js";

// Peers whose clocks run slightly behind ours would otherwise reject a certificate minted just now.
const CLOCK_SKEW_MS = 60_000;
const DAY_MS = 86_400_000;

/** Random positive serial that encodes as exactly 16 DER octets (RFC 5280 §4.1.2.2). */
export function randomSerialNumber(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  // Clearing the top bit keeps the INTEGER positive without a 0x00 pad octet; setting the next one
  // stops the encoder stripping a leading zero octet. 126 random bits remain.
  bytes[0] = (bytes[0] & 0x7f) | 0x40;
  return Buffer.from(bytes).toString("hex");
}

export interface Validity {
  notBefore: Date;
  notAfter: Date;
}

/**
 * Validity window starting slightly in the past. `notAfterLimit` caps the end at the issuer's own
 * expiry: a leaf that outlives its CA would only fail later, and more confusingly.
 */
export function validityWindow(validityDays: number, notAfterLimit?: Date): Validity {
  if (!Number.isFinite(validityDays) || validityDays <= 0) {
    throw new RangeError(`validityDays must be a positive number, got ${validityDays}`);
  }
  const now = Date.now();
  const notBefore = new Date(now - CLOCK_SKEW_MS);
  let notAfter = new Date(now + validityDays * DAY_MS);
  if (notAfterLimit && notAfter > notAfterLimit) {
    notAfter = notAfterLimit;
  }
  if (notAfter.getTime() <= now) {
    throw new RangeError("issuer certificate has expired");
  }
  return { notBefore, notAfter };
}

/**
 * Subject built from structured attributes rather than an RFC 4514 string, so commas, plus signs
 * or equals signs in names (e.g. Kubernetes groups) can never be misparsed into extra attributes.
 */
export function subjectName(commonName: string, organization: readonly string[] = []): x509.JsonName {
  if (commonName.trim() === "") {
    throw new TypeError("commonName must not be empty");
  }
  for (const org of organization) {
    if (org.trim() === "") {
      throw new TypeError("organization entries must not be empty");
    }
  }
  return [...organization.map((org) => ({ O: [org] })), { CN: [commonName] }];
}
