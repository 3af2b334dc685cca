/**
 * The deletions an OwnershipWriter still owes, in the order they became due, and their bound.
 * They pile up only while the registry is unreachable, one per agent that left; past the bound
 * the oldest are given up (the writer's resync deletes those rows after the outage). Counting
 * and dropping cost O(1) per release: a release during an outage, and every release of a drain
 * after it, must not scan the thousands already waiting.
 */
export class PendingReleases {
  /** Keys due a deletion, oldest first (a Set keeps insertion order). */
  private readonly keys = new Set<string>();

  constructor(readonly max: number) {}

  get size(): number {
    return this.keys.size;
  }

  /** Records whether `k` is due a deletion now; a key already due keeps its place. */
  set(k: string, due: boolean): void {
    if (due) this.keys.add(k);
    else this.keys.delete(k);
  }

  clear(): void {
    this.keys.clear();
  }

  /**
   * Removes and yields the oldest keys beyond the bound, skipping those in `busy` (deletions in
   * flight count but are not dropped). `busy` holds at most the writer's concurrency, so each
   * call costs what it drops plus that.
   */
  *excess(busy: ReadonlySet<string>): Generator<string> {
    for (const k of this.keys) {
      if (this.keys.size <= this.max) return;
      if (busy.has(k)) continue;
      this.keys.delete(k);
      yield k;
    }
  }
}
