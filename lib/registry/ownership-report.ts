/**
 * What an OwnershipWriter tells its owner: its state (metrics, the verbose readiness view) and,
 * with each failed write, which row it was for, so a failure can be logged with its tenant and
 * agent.
 */

/** What a failed write was for: the row's tenant and agent when there is one (for the log). */
export interface OwnershipWrite {
  readonly kind: "claim" | "release" | "resync" | "invalid-row";
  readonly tenant?: string;
  readonly agentId?: string;
}

export interface OwnershipWriterState {
  readonly pendingClaims: number;
  readonly pendingReleases: number;
  /** Deletions given up because more than maxPendingReleases were waiting. */
  readonly droppedReleases: number;
  /** Claims refused because the table held a newer incarnation's row (we are a stale process). */
  readonly superseded: number;
  readonly lastError: Error | null;
  readonly consecutiveFailures: number;
  readonly failingSince: number | null;
}
