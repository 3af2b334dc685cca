/**
 * Bearer tokens of tenants: `kgw_<kind>_<tenant>_<tokenId>_<secret>`, e.g.
 * `kgw_agent_acme_3f9c2a1b0d4e5f60_<64 hex digits>`.
 *
 * - `kgw_` lets secret scanners and people recognise a leaked token.
 * - `<kind>` (agent or caller) makes the role part of the credential: a caller token presented
 *   by an agent is refused before any lookup.
 * - `<tenant>` and `<tokenId>` are public: the gateway finds the one record and the one hash to
 *   compare with a single read (no scan, no index), and the operator can revoke by id.
 * - `<secret>` is 256 bits from the CSPRNG, in hex.
 *
 * Only SHA-256 of the whole token is stored. A slow password hash (bcrypt, scrypt) would add
 * nothing: it protects low-entropy secrets from guessing, and 256 random bits cannot be guessed;
 * it would only make every handshake cost milliseconds of CPU, a lever for denial of service.
 * Hashing the whole text binds tenant, kind and id to the secret.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { isValidTenantId } from "./tenant-id.js";

/** The kinds of token that authenticate a peer: what verify.ts checks. */
export type TokenKind = "agent" | "caller";
/**
 * Every kind of token we issue. An install token (`kgw_install_…`, lib/tenancy/install/) only
 * fetches an agent manifest; its kind is in its text, so verify.ts refuses it as `wrong-role`
 * wherever an agent or caller token is expected, before any lookup.
 */
export type IssuedTokenKind = TokenKind | "install";

/** 64 random bits: unique within a tenant in practice, and checked on creation anyway. */
const TOKEN_ID_BYTES = 8;
/** 256 bits: beyond guessing, so a fast hash is enough (see above). */
const SECRET_BYTES = 32;

const TOKEN = /^kgw_(agent|caller|install)_([a-z0-9-]{1,63})_([0-9a-f]{16})_([0-9a-f]{64})$/;

/**
 * Longest text worth parsing as a token (the longest valid one, an install token, is 157
 * characters). Anything longer is refused before it is hashed or matched.
 */
export const MAX_TOKEN_LENGTH = 160;

export const TOKEN_ID_PATTERN = /^[0-9a-f]{16}$/;

export interface GeneratedToken {
  /** The token itself: shown once, never stored. */
  readonly token: string;
  readonly id: string;
  readonly sha256: string;
}

export interface ParsedToken {
  readonly kind: IssuedTokenKind;
  readonly tenantId: string;
  readonly tokenId: string;
}

export function generateToken(kind: IssuedTokenKind, tenantId: string): GeneratedToken {
  const id = randomBytes(TOKEN_ID_BYTES).toString("hex");
  const token = `kgw_${kind}_${tenantId}_${id}_${randomBytes(SECRET_BYTES).toString("hex")}`;
  return { token, id, sha256: hashToken(token) };
}

/** The public parts of a token, or undefined if the text is not one of ours. Never throws. */
export function parseToken(token: unknown): ParsedToken | undefined {
  if (typeof token !== "string" || token.length > MAX_TOKEN_LENGTH) return undefined;
  const m = TOKEN.exec(token);
  if (!m || !isValidTenantId(m[2])) return undefined;
  return { kind: m[1] as IssuedTokenKind, tenantId: m[2]!, tokenId: m[3]! };
}

export function hashToken(token: string): string {
  return createHash("sha256").update(token, "utf8").digest("hex");
}

/** Constant-time comparison of a token with a stored hex SHA-256 (a malformed hash never matches). */
export function tokenMatchesHash(token: string, storedSha256: string): boolean {
  const presented = createHash("sha256").update(token, "utf8").digest();
  const stored = Buffer.from(storedSha256, "hex");
  // Equal lengths are required by timingSafeEqual; the stored hash's length is not secret.
  return stored.length === presented.length && timingSafeEqual(stored, presented);
}
