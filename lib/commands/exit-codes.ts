/**
 * kgw's exit codes, one table for every command, so that a script can tell "not there" from
 * "already so" from "could not": docs/CONFIGURATION.md ("Exit codes") lists the same table, and
 * test/unit/exit-codes.test.ts checks that the two agree.
 *
 * A command that runs until stopped (server, agent, demo) ends 0 on a clean stop and 1 when it
 * failed or was stopped at once by a second signal.
 */
import { type ErrorCode, GatewayError } from "../errors.js";

export const EXIT = {
  /** Done. */
  OK: 0,
  /** Failed: the store, the network or a file; a corrupt record; a partial result; a bug. */
  FAILED: 1,
  /** Usage: an unknown command, subcommand or flag, a bad value, a missing argument. */
  USAGE: 2,
  /** Not found: no such tenant (or a deleted one), no such credential. */
  NOT_FOUND: 3,
  /** Already so: the tenant exists, the credential is revoked already. Nothing was changed. */
  ALREADY: 4,
  /** Not confirmed: a destructive command was declined, or had no terminal to ask and no --yes. */
  NOT_CONFIRMED: 5,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

/** The exit code of a failure by its code; anything that is not one of ours is FAILED. */
const BY_ERROR_CODE: Partial<Record<ErrorCode, ExitCode>> = {
  ERR_CONFIG: EXIT.USAGE,
  ERR_BAD_REQUEST: EXIT.USAGE,
  ERR_NOT_FOUND: EXIT.NOT_FOUND,
  ERR_ALREADY_EXISTS: EXIT.ALREADY,
  ERR_ALREADY_REVOKED: EXIT.ALREADY,
};

export function exitCodeFor(err: unknown): ExitCode {
  if (!(err instanceof GatewayError)) return EXIT.FAILED;
  return BY_ERROR_CODE[err.code] ?? EXIT.FAILED;
}
