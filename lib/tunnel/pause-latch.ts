/**
 * Pauses a readable source while any of its consumers is backed up, and resumes it when the last
 * one has drained. This is how a full per-connection buffer pushes back on the stream that feeds
 * it without a queue in between: the source stops being read, so HTTP/2 or TCP flow control
 * stops the sender.
 */
export interface Pausable {
  pause(): unknown;
  resume(): unknown;
}

export class PauseLatch {
  private readonly blockers = new Set<object>();

  constructor(private readonly source: Pausable) {}

  /** `by` is backed up; the source stays paused until every blocker has unblocked. */
  block(by: object): void {
    if (this.blockers.size === 0) this.source.pause();
    this.blockers.add(by);
  }

  unblock(by: object): void {
    if (this.blockers.delete(by) && this.blockers.size === 0) this.source.resume();
  }

  get blocked(): boolean {
    return this.blockers.size > 0;
  }
}
