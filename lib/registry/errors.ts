/**
 * Failures of the fleet registry. Codes live in lib/errors.ts; callers switch on the class or
 * `code`, never on message text. Outcomes that are part of normal operation (a claim superseded
 * by a newer session, a release fenced off) are return values, not errors.
 */
import { GatewayError } from "../errors.js";

/**
 * A heartbeat was refused because a newer incarnation of the same instance id holds the lease:
 * this process has been replaced and must stop acting as that instance.
 */
export class LeaseLostError extends GatewayError {
  constructor(
    readonly instanceId: string,
    readonly incarnation: number,
  ) {
    super("ERR_CONFLICT", `instance ${instanceId}: a newer incarnation than ${incarnation} holds the lease`);
  }
}

/** The registry could not be reached or answered with errors after the client's retries. */
export class RegistryUnavailableError extends GatewayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_STORE_UNAVAILABLE", `fleet registry: ${message}`, options);
  }
}

/** An item that does not parse as what its key says it is. Names the key, never the content. */
export class RegistryCorruptItemError extends GatewayError {
  constructor(
    readonly location: string,
    reason: string,
  ) {
    super("ERR_STORE_CORRUPT", `fleet registry: item ${location}: ${reason}`);
  }
}

/** An id or number given to the registry that cannot be stored safely (a bug or a hostile peer). */
export class InvalidRegistryInputError extends GatewayError {
  constructor(message: string) {
    super("ERR_BAD_REQUEST", `fleet registry: ${message}`);
  }
}
