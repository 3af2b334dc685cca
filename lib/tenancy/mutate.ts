/**
 * Read, transform, conditional write, and again on conflict: the only way tenant records change.
 * With conditional writes a conflict means another writer made progress, so a few attempts
 * suffice; jittered backoff keeps two writers from colliding in lockstep.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { TenantVersionConflictError } from "./errors.js";
import type { TenantRecord } from "./model.js";
import { deepFreeze } from "./record-codec.js";
import type { TenantStore } from "./store.js";

/** Attempts before a conflict is reported: each lost attempt means someone else's write landed. */
export const MAX_WRITE_ATTEMPTS = 10;
/** First backoff after a conflict; doubled per attempt, jittered, capped at MAX_BACKOFF_MS. */
const BASE_BACKOFF_MS = 5;
const MAX_BACKOFF_MS = 200;

/**
 * Applies `change` to the current record of `id` (undefined if there is none) and writes the
 * result conditionally, as the version after the current one (whatever version `change` left). `change` runs again on every attempt, so it must be a pure function of
 * its input (anything random it makes, such as a token, is made anew and only the last one was
 * written). Errors it throws (not found, already exists) end the update at once.
 */
export async function updateTenant(
  store: TenantStore,
  id: string,
  change: (current: TenantRecord | undefined) => TenantRecord,
  options: { maxAttempts?: number } = {},
): Promise<TenantRecord> {
  const attempts = options.maxAttempts ?? MAX_WRITE_ATTEMPTS;
  for (let attempt = 1; ; attempt++) {
    const current = await store.get(id);
    const next: TenantRecord = { ...change(current), version: (current?.version ?? 0) + 1 };
    if (next.id !== id) throw new TypeError(`updateTenant(${id}) produced a record for ${next.id}`);
    try {
      await store.put(next);
      return deepFreeze(next);
    } catch (err) {
      if (!(err instanceof TenantVersionConflictError) || attempt >= attempts) throw err;
    }
    const ceiling = Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** (attempt - 1));
    await sleep(ceiling / 2 + Math.random() * (ceiling / 2));
  }
}
