/**
 * What the soak's load did, counted as it happens. A dial or transfer that fails while an agent
 * restart is under way (or that began before one and ended after) is counted apart: some of those
 * fail by design (a tunnel through a killed agent breaks). Any other failure is the server's or
 * the agent's fault, and so is a corrupted byte, whenever it happens.
 */
import { ContentMismatch } from "../harness/transfer.js";
import { errorMessage } from "../harness/util.js";

/** Unexpected failures quoted in the report, at most. */
const KEEP_ERRORS = 5;

export interface Counts {
  dialsOk: number;
  dialsFailed: number;
  dialsFailedDuringRestart: number;
  transfersOk: number;
  transfersFailed: number;
  transfersFailedDuringRestart: number;
  /** Transfers whose bytes differed from what was sent (also counted as failed). */
  corrupted: number;
  /** Bytes moved and checked. */
  bytes: number;
  agentRestarts: number;
  agentRestartsFailed: number;
  slowOpened: number;
  slowClosedByServer: number;
}

/** Whether an agent restart overlapped an operation. */
export class RestartWindow {
  private inProgress = 0;
  private changes = 0;

  begin(): void {
    this.inProgress++;
    this.changes++;
  }

  end(): void {
    this.inProgress--;
    this.changes++;
  }

  /** Taken when an operation starts. */
  mark(): number {
    return this.inProgress > 0 ? -1 : this.changes;
  }

  /** Whether a restart was under way at any time since `mark` was taken. */
  overlapped(mark: number): boolean {
    return mark === -1 || this.inProgress > 0 || this.changes !== mark;
  }
}

export class Tally {
  readonly counts: Counts = {
    dialsOk: 0,
    dialsFailed: 0,
    dialsFailedDuringRestart: 0,
    transfersOk: 0,
    transfersFailed: 0,
    transfersFailedDuringRestart: 0,
    corrupted: 0,
    bytes: 0,
    agentRestarts: 0,
    agentRestartsFailed: 0,
    slowOpened: 0,
    slowClosedByServer: 0,
  };
  readonly errors: string[] = [];
  /** How long each slow connection lasted before the server closed it, in ms. */
  readonly slowLifetimesMs: number[] = [];
  readonly restarts = new RestartWindow();

  /** Runs one dial; counts it. */
  async dial(op: () => Promise<void>): Promise<void> {
    const mark = this.restarts.mark();
    try {
      await op();
      this.counts.dialsOk++;
    } catch (err) {
      if (this.restarts.overlapped(mark)) this.counts.dialsFailedDuringRestart++;
      else this.unexpected("dial", err, () => this.counts.dialsFailed++);
    }
  }

  /** Runs one transfer (resolving to the bytes it moved); counts it. */
  async transfer(op: () => Promise<number>): Promise<void> {
    const mark = this.restarts.mark();
    try {
      this.counts.bytes += await op();
      this.counts.transfersOk++;
    } catch (err) {
      if (err instanceof ContentMismatch) {
        this.counts.corrupted++;
        this.unexpected("transfer", err, () => this.counts.transfersFailed++);
      } else if (this.restarts.overlapped(mark)) this.counts.transfersFailedDuringRestart++;
      else this.unexpected("transfer", err, () => this.counts.transfersFailed++);
    }
  }

  unexpected(what: string, err: unknown, count: () => void): void {
    count();
    if (this.errors.length < KEEP_ERRORS) {
      this.errors.push(`${new Date().toISOString()} ${what}: ${errorMessage(err).split("\n")[0]}`);
    }
  }

  /** The counts so far, as a copy. */
  snapshot(): Counts {
    return { ...this.counts };
  }
}
