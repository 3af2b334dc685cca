/**
 * The one way to log a refusal of unauthenticated input (a request that is not gRPC, an unknown
 * method, a malformed head, a bogus install link): within a budget of lines a second
 * (log-budget.ts), and with every field passed through untrusted-input.ts, so that a flood
 * costs a bounded number of bounded lines and no line carries what the peer sent.
 */
import { budgetedInfo } from "./log-budget.js";
import type { Logger } from "./logger.js";
import { untrustedFields } from "./untrusted-input.js";

export type RefusalLog = (fields: Record<string, unknown>, message: string) => void;

/**
 * Refusal lines a second at info, per log (each listener's, the install route's); the rest go to
 * debug. Ten a second shows an operator what is refused and by whom without letting a client
 * that repeats a refused request at will write the log.
 */
export const REFUSAL_LINES_PER_SECOND = 10;

export interface RefusalLogOptions {
  /** Paths the server serves itself, logged whole (its gRPC methods). */
  knownPaths?: ReadonlySet<string>;
  perSecond?: number;
  now?: () => number;
}

export function refusalLog(log: Logger, opts: RefusalLogOptions = {}): RefusalLog {
  const budgeted = budgetedInfo(log, opts.perSecond ?? REFUSAL_LINES_PER_SECOND, opts.now);
  return (fields, message) => budgeted(untrustedFields(fields, opts.knownPaths), message);
}
