/**
 * The decisions a gateway takes about peers, passed in rather than made inside the data path:
 * who an agent is, who a caller is, and whether a caller may make a dial. The composition root
 * (services/server/main.ts) chooses them; tenancy and egress policy replace the single-tenant
 * defaults built here.
 */

import { readFileSync } from "node:fs";
import type { ServerOptions } from "../../config/server-options.js";
import { ConfigError } from "../../errors.js";
import type { DialRequest } from "../../tunnel/endpoints.js";
import type { CredentialHold, DialContext } from "../core/dial-context.js";
import type { InstallRoute } from "../install/install-route.js";
import {
  type AgentAuthenticator,
  hashToken,
  parseTokenFile,
  staticAgentAuthenticator,
} from "./agent-auth.js";
import { type CallerAuthenticator, singleTenantCallerAuthenticator } from "./caller-auth.js";
import type { QuotaBook } from "./tenant-quotas.js";

/**
 * Throws a GatewayError for a dial it refuses (DestinationNotAllowedError: 403 /
 * PERMISSION_DENIED); otherwise returns the request as it goes to the agent, with whatever the
 * policy attaches (the tenant's egress policy, for our agents).
 */
export type DialAuthorizer = (ctx: DialContext, req: DialRequest) => DialRequest;

export interface GatewayPolicy {
  authenticateAgent: AgentAuthenticator;
  authenticateCaller: CallerAuthenticator;
  authorizeDial: DialAuthorizer;
  /** Told of every agent stream, frontend call and CONNECT tunnel, to close it on revocation. */
  hold: CredentialHold;
  /** Tenants' quotas (tenant-quotas.ts); absent: none. */
  quotas?: QuotaBook;
  /**
   * The one-line agent install on the gateway port (lib/server/install/), built from the tenant
   * store the policy holds; absent: off (the drop-in, or no --install-gateway-address).
   */
  install?: InstallRoute;
  /** Releases what the policy holds (a tenant store and its watch); the gateway calls it last. */
  close?(): void | Promise<void>;
}

/** Nothing to revoke: the drop-in's credentials (flags and files) do not change while it runs. */
export const holdNothing: CredentialHold = () => () => {};

/** Every dial an authenticated caller asks for (the agent applies its destination policy). */
export const allowEveryDial: DialAuthorizer = (_ctx, req) => req;

/** What the drop-in's policy reads of the server's options: the agents' credentials and whether callers need one. */
export interface SingleTenantPolicyOptions {
  agent: Pick<ServerOptions["agent"], "tokens" | "tokenFile" | "tls">;
  frontend: Pick<ServerOptions["frontend"], "anonymousCallers">;
}

function loadTokenHashes(opts: SingleTenantPolicyOptions): Buffer[] {
  const tokens = [...opts.agent.tokens];
  if (opts.agent.tokenFile) {
    try {
      tokens.push(...parseTokenFile(readFileSync(opts.agent.tokenFile, "utf8")));
    } catch (err) {
      throw new ConfigError(`--agent-token-file: ${(err as Error).message}`, { cause: err });
    }
    if (tokens.length === 0)
      throw new ConfigError(`--agent-token-file ${opts.agent.tokenFile} has no tokens`);
  }
  return tokens.map(hashToken);
}

/** The drop-in konnectivity-server: one tenant, "default"; agents by token or certificate. */
export function singleTenantPolicy(opts: SingleTenantPolicyOptions): GatewayPolicy {
  return {
    authenticateAgent: staticAgentAuthenticator({
      tokenHashes: loadTokenHashes(opts),
      acceptCertificates: opts.agent.tls.ca !== "",
    }),
    authenticateCaller: singleTenantCallerAuthenticator({ anonymousCallers: opts.frontend.anonymousCallers }),
    authorizeDial: allowEveryDial,
    hold: holdNothing,
  };
}
