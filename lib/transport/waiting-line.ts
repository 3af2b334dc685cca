/**
 * Connections waiting for their TLS handshake to start (handshake-gate.ts): one first-in
 * first-out line per source, and the sources served in turn, so that a burst from one address
 * (a large cluster behind one NAT address) does not hold back another address's connections,
 * and within a source nobody overtakes. Holds entries only; timers and sockets are the gate's.
 */

export class WaitingLine<T extends { readonly source: string }> {
  private readonly bySource = new Map<string, T[]>();
  private count = 0;

  /** Entries waiting, over every source. */
  get size(): number {
    return this.count;
  }

  /** Whether `source` has an entry waiting (a newcomer from it waits behind). */
  has(source: string): boolean {
    return this.bySource.has(source);
  }

  add(entry: T): void {
    const line = this.bySource.get(entry.source);
    if (line) line.push(entry);
    else this.bySource.set(entry.source, [entry]);
    this.count++;
  }

  /** Removes `entry` wherever it is in its line; false if it was not waiting. */
  remove(entry: T): boolean {
    const line = this.bySource.get(entry.source);
    const i = line ? line.indexOf(entry) : -1;
    if (!line || i === -1) return false;
    line.splice(i, 1);
    if (line.length === 0) this.bySource.delete(entry.source);
    this.count--;
    return true;
  }

  /** Sources with entries waiting. */
  get sourceCount(): number {
    return this.bySource.size;
  }

  /** The source whose turn it is, if any waits. */
  next(): string | undefined {
    return this.bySource.keys().next().value;
  }

  /** Passes `source`'s turn: its next comes after every other source's. */
  pass(source: string): void {
    const line = this.bySource.get(source);
    if (!line) return;
    this.bySource.delete(source);
    this.bySource.set(source, line);
  }

  /**
   * Takes the first entry of `source`'s line; the source's next turn is then after every other
   * source's.
   */
  take(source: string): T | undefined {
    const line = this.bySource.get(source);
    const entry = line?.shift();
    if (!line || entry === undefined) return undefined;
    this.bySource.delete(source);
    if (line.length > 0) this.bySource.set(source, line);
    this.count--;
    return entry;
  }

  /** The first entry of `source`'s line. */
  first(source: string): T | undefined {
    return this.bySource.get(source)?.[0];
  }
}
