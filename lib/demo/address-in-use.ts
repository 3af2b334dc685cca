/**
 * Whether a start-up failure was a port already taken (EADDRINUSE), anywhere in its chain of
 * causes: the gateway's listeners wrap Node's error in a ConfigError, the agent's HTTP endpoints
 * pass it on as it is. The local tools name the port and the flag that avoids it instead of
 * printing a stack.
 */
export interface AddressInUse {
  /** The port asked for, when Node said which (it does for TCP listens). */
  port: number | null;
  message: string;
}

const MAX_CAUSES = 8;

export function addressInUse(err: unknown): AddressInUse | null {
  let e: unknown = err;
  for (let i = 0; i < MAX_CAUSES && e instanceof Error; i++) {
    const errno = e as NodeJS.ErrnoException & { port?: unknown };
    if (errno.code === "EADDRINUSE") {
      return { port: typeof errno.port === "number" ? errno.port : null, message: errno.message };
    }
    e = errno.cause;
  }
  return null;
}
