/**
 * The leak check every suite ends with: what Node holds open (sockets, servers, timers, child
 * processes, by kind), and a wait until no kind is held more often than before the suite began.
 */

/** How many resources of each kind Node holds open now (process.getActiveResourcesInfo). */
export function activeResources(): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of process.getActiveResourcesInfo()) m.set(r, (m.get(r) ?? 0) + 1);
  return m;
}

/**
 * Waits (polling) until no kind of resource is held more often than in `baseline`; throws after
 * `timeoutMs`, naming what is still held against the baseline.
 */
export async function expectNoLeakedResources(
  baseline: Map<string, number>,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const clean = () => [...activeResources()].every(([k, n]) => n <= (baseline.get(k) ?? 0));
  while (!clean()) {
    if (Date.now() > deadline) {
      throw new Error(
        `no leaked handles not met within ${timeoutMs} ms: ${JSON.stringify([...activeResources()])} vs ${JSON.stringify([...baseline])}`,
      );
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}
