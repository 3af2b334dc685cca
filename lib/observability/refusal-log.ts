/**
 * The one way to log a refusal of unauthenticated input (a request that is not gRPC, an unknown
 * method, a malformed head, a bogus install link): within a budget of lines a second
 * (log-budget.ts), and with every field passed through untrusted-input.ts, so that a flood
 * costs a bounded number of bounded lines and no line carries what the peer sent.
 */
import { budgetedInfo } from "./log-budget.js";
import type { Logger } from "./logger.js";
import { untrustedFields } from "./untrusted-input.js";

/**
 * `fields` are redacted (untrusted-input.ts); `ours` are kept as they are: only values the
 * server made or holds itself (an error code, a listener, a tenant and credential id read from
 * the store), never anything the peer sent, which a long code like ERR_PROXY_AUTH_REQUIRED would
 * otherwise lose to the secret-sized-word rule.
 */
export type RefusalLog = (
  fields: Record<string, unknown>,
  message: string,
  ours?: Readonly<Record<string, string | number | boolean | undefined>>,
) => void;

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
  return (fields, message, ours) =>
    budgeted({ ...untrustedFields(fields, opts.knownPaths), ...ours }, message);
}
