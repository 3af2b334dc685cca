/**
 * A fresh agent token for a manifest. Stored tokens are hashed and cannot be printed again, so a
 * manifest always carries a new one: the same store operation as `rotate --credential
 * agent-token`, except that the tenant's other agent tokens stay valid (the agents already
 * running elsewhere keep working; revoke their tokens when they are gone).
 */

import type { TenantRecord } from "../model.js";
import { updateTenant } from "../mutate.js";
import { addToken, requireActive } from "../operations.js";
import type { TenantStore } from "../store.js";
import { checkTenantId } from "../tenant-id.js";
import { type GeneratedToken, generateToken } from "../tokens.js";

export interface MintedAgentToken {
  /** The token itself: goes into the manifest and nowhere else. */
  readonly token: string;
  /** Its public id (`kgw tenant show`, `kgw tenant revoke`). */
  readonly tokenId: string;
  /** The record as written, with the token listed. */
  readonly record: TenantRecord;
}

/** Throws TenantNotFoundError for an unknown or deleted tenant, InvalidTenantInputError for a bad id. */
export async function mintAgentToken(
  store: TenantStore,
  tenantId: string,
  now: () => Date,
): Promise<MintedAgentToken> {
  const id = checkTenantId(tenantId);
  let token: GeneratedToken | undefined;
  const record = await updateTenant(store, id, (current) => {
    // Made anew on every attempt: only the token of the write that lands is valid.
    token = generateToken("agent", id);
    return addToken(requireActive(current, id), "agent-token", token, now());
  });
  return { token: token!.token, tokenId: token!.id, record };
}
