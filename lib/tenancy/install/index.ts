/**
 * The one-line agent install: install tokens (install-tokens.ts, pure), and issuing and spending
 * them against the store (store-operations.ts). The HTTP route is lib/server/install/.
 */

export { type InstallRefusalReason, InstallTokenRefusedError } from "./errors.js";
export {
  addInstallToken,
  checkInstallToken,
  checkInstallTokenTtl,
  DEFAULT_INSTALL_TOKEN_TTL_MS,
  type InstallTokenOptions,
  type InstallTokenStatus,
  installTokenStatus,
  MAX_INSTALL_TOKEN_TTL_MS,
  MIN_INSTALL_TOKEN_TTL_MS,
  markInstallTokenUsed,
} from "./install-tokens.js";
export {
  type IssuedInstallToken,
  issueInstallToken,
  type RedeemedInstallToken,
  redeemInstallToken,
} from "./store-operations.js";
