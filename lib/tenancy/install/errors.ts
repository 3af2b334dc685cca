/**
 * Why an install token was refused. The reason is for the server's log and metrics; the peer
 * learns only "no such link" (unknown, malformed, revoked: 404) or "this link is spent"
 * (expired, used: 410), never whether the tenant exists.
 */
import { GatewayError } from "../../errors.js";

export type InstallRefusalReason = "malformed" | "unknown" | "revoked" | "expired" | "used";

export class InstallTokenRefusedError extends GatewayError {
  constructor(
    readonly reason: InstallRefusalReason,
    /** The token's public id when the text parsed; never the secret. */
    readonly tokenId?: string,
  ) {
    super("ERR_NOT_FOUND", `install token refused (${reason})`);
  }
}
