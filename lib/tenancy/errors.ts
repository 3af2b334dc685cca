/**
 * Failures of the tenant store and of tenant operations. Codes live in lib/errors.ts; callers
 * switch on `code` (ERR_CONFLICT means "re-read and try again"), never on message text.
 */
import { GatewayError, UnauthenticatedError } from "../errors.js";

/** No tenant (or no credential) with that id. */
export class TenantNotFoundError extends GatewayError {
  constructor(what: string) {
    super("ERR_NOT_FOUND", `${what} not found`);
  }
}

/** `create` for a tenant id that is in use (a deleted tenant's id may be reused). */
export class TenantExistsError extends GatewayError {
  constructor(readonly tenantId: string) {
    super("ERR_ALREADY_EXISTS", `tenant ${tenantId} already exists`);
  }
}

/** `revoke` of a credential (or install link) that is revoked already: nothing changes. */
export class CredentialAlreadyRevokedError extends GatewayError {
  constructor(readonly credentialId: string) {
    super("ERR_ALREADY_REVOKED", `credential ${credentialId} is already revoked`);
  }
}

/**
 * A conditional write lost: the stored version was not the one the write was based on (someone
 * else wrote in between). DynamoDB's ConditionalCheckFailedException becomes this error.
 */
export class TenantVersionConflictError extends GatewayError {
  constructor(
    readonly tenantId: string,
    readonly expectedVersion: number,
  ) {
    super(
      "ERR_CONFLICT",
      `tenant ${tenantId} changed concurrently (the write expected version ${expectedVersion}); re-read and retry`,
    );
  }
}

/** Stored data that does not parse or fails validation. Names what and where, never its content. */
export class TenantStoreCorruptError extends GatewayError {
  /** The tenant the bad data belongs to, when the location tells. */
  readonly tenantId: string | undefined;

  constructor(
    readonly location: string,
    reason: string,
    options?: { cause?: unknown; tenantId?: string },
  ) {
    super("ERR_STORE_CORRUPT", `tenant store: ${location}: ${reason}`, options);
    this.tenantId = options?.tenantId;
  }
}

/** The store could not be read or written (I/O error, permissions, lock-free retries exhausted). */
export class TenantStoreUnavailableError extends GatewayError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("ERR_STORE_UNAVAILABLE", `tenant store: ${message}`, options);
  }
}

/** Input to a tenant operation is invalid: bad id, oversized or hostile text, too many credentials. */
export class InvalidTenantInputError extends GatewayError {
  constructor(message: string) {
    super("ERR_BAD_REQUEST", message);
  }
}

/**
 * Why a credential was refused, for logs, metrics and audit. The peer only ever sees the
 * generic message: telling it whether the tenant or the id exists would help a guesser.
 */
export type RefusalReason =
  | "malformed"
  | "wrong-role"
  | "unknown-tenant"
  | "tenant-deleted"
  | "unknown-credential"
  | "mismatch"
  | "expired"
  | "revoked";

/** A tenant credential was presented and refused (ERR_UNAUTHENTICATED: 401, gRPC UNAUTHENTICATED). */
export class CredentialRefusedError extends UnauthenticatedError {
  /**
   * `claimedBy`: the tenant, and the credential ("token:<id>", "cert:<serial>"), the refused
   * credential named, only where the store holds them (a value the caller merely wrote is never
   * kept here), for the operator's log line; never sent to the peer.
   */
  constructor(
    readonly reason: RefusalReason,
    readonly claimedBy?: { tenant: string; credential?: string },
  ) {
    super("invalid, expired or revoked credential");
  }
}
