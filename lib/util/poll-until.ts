/** How often pollUntil checks: often enough to add no noticeable wait, rarely enough to cost nothing. */
const POLL_EVERY_MS = 10;

/**
 * Resolves once `done()` is true (true) or `timeoutMs` has passed (false). For waits on state
 * that changes from events this code does not own (sockets reporting their close).
 */
export async function pollUntil(done: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, POLL_EVERY_MS));
  }
  return true;
}
