/**
 * Install tokens against the store: issuing one (`kgw tenant install-token`) and spending one
 * (the install route). Each is one conditional write (mutate.ts), so the rules of
 * install-tokens.ts are applied to the record as it is, not as a watch last saw it.
 */
import type { TenantRecord } from "../model.js";
import { updateTenant } from "../mutate.js";
import { addToken, requireActive } from "../operations.js";
import type { TenantStore } from "../store.js";
import { checkTenantId } from "../tenant-id.js";
import { type GeneratedToken, generateToken, parseToken } from "../tokens.js";
import { InstallTokenRefusedError } from "./errors.js";
import {
  addInstallToken,
  checkInstallToken,
  type InstallTokenOptions,
  markInstallTokenUsed,
} from "./install-tokens.js";

export interface IssuedInstallToken {
  /** The token itself: printed once, in the install line, and never stored. */
  readonly token: string;
  readonly tokenId: string;
  readonly expiresAt: string;
  readonly record: TenantRecord;
}

/** Throws TenantNotFoundError for an unknown or deleted tenant, InvalidTenantInputError for bad input. */
export async function issueInstallToken(
  store: TenantStore,
  tenantId: string,
  options: InstallTokenOptions,
  now: () => Date,
): Promise<IssuedInstallToken> {
  const id = checkTenantId(tenantId);
  let token: GeneratedToken | undefined;
  const record = await updateTenant(store, id, (current) => {
    // Made anew on every attempt: only the token of the write that lands is valid.
    token = generateToken("install", id);
    return addInstallToken(requireActive(current, id), token, options, now());
  });
  const listed = record.installTokens.find((t) => t.id === token!.id)!;
  return { token: token!.token, tokenId: token!.id, expiresAt: listed.expiresAt, record };
}

export interface RedeemedInstallToken {
  readonly tenantId: string;
  readonly installTokenId: string;
  /** A new agent token of the tenant, listed by the same write: goes into the manifest only. */
  readonly agentToken: string;
  readonly agentTokenId: string;
  readonly record: TenantRecord;
}

/**
 * Spends an install token: in one conditional write, checks it against the current record, marks
 * it used and lists a fresh agent token. Two fetches of a single-use token race on that write;
 * the loser re-reads, finds it used and is refused, so exactly one gets a manifest. Throws
 * InstallTokenRefusedError (nothing written), or what the write throws (conflicts exhausted,
 * store unavailable, the tenant already holding 32 usable agent tokens).
 */
export async function redeemInstallToken(
  store: TenantStore,
  token: string,
  now: () => Date,
): Promise<RedeemedInstallToken> {
  const parsed = parseToken(token);
  // Malformed text never reaches the store.
  if (parsed?.kind !== "install") throw new InstallTokenRefusedError("malformed");
  let agent: GeneratedToken | undefined;
  let installTokenId = "";
  const record = await updateTenant(store, parsed.tenantId, (current) => {
    const t = now();
    const listed = checkInstallToken(current, token, t);
    installTokenId = listed.id;
    agent = generateToken("agent", parsed.tenantId);
    return markInstallTokenUsed(addToken(current!, "agent-token", agent, t), listed.id, t);
  });
  return {
    tenantId: parsed.tenantId,
    installTokenId,
    agentToken: agent!.token,
    agentTokenId: agent!.id,
    record,
  };
}
