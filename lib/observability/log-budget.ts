/**
 * At most so many lines a second of one kind at info (or warn); the rest at debug. A line that is useful
 * once (a refused caller, a failed dial) becomes a flood when a misbehaving client repeats it
 * thousands of times a second, and writing the flood costs the CPU every other tenant needs. The
 * counters (metrics) still see every event; the next line let through says in `heldBack` how
 * many were held back.
 */
import type { Logger } from "./logger.js";

export type BudgetedLog = (fields: Record<string, unknown>, message: string) => void;

export function budgetedInfo(log: Logger, perSecond: number, now: () => number = Date.now): BudgetedLog {
  return budgeted(log, "info", perSecond, now);
}

/** The same at warn: failures of our own machinery (the registry) that repeat while it is down. */
export function budgetedWarn(log: Logger, perSecond: number, now: () => number = Date.now): BudgetedLog {
  return budgeted(log, "warn", perSecond, now);
}

function budgeted(log: Logger, level: "info" | "warn", perSecond: number, now: () => number): BudgetedLog {
  let windowStart = Number.NEGATIVE_INFINITY;
  let used = 0;
  let held = 0;
  return (fields, message) => {
    const t = now();
    if (t - windowStart >= 1_000) {
      windowStart = t;
      used = 0;
    }
    if (used < perSecond) {
      used++;
      if (held > 0) {
        // The same message, so that whoever searches the log for it finds this line too.
        log[level]({ ...fields, heldBack: held }, message);
        held = 0;
      } else {
        log[level](fields, message);
      }
      return;
    }
    held++;
    log.debug(fields, message);
  };
}
