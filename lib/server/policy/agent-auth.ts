/**
 * Who is this agent? Either a client certificate verified against --cluster-ca-cert during the
 * TLS handshake, or a bearer token compared against SHA-256 hashes (the plaintext is never kept).
 * The authenticator is a plain function so tenancy can replace it with a per-tenant lookup.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { PeerCertificate } from "node:tls";
import { UnauthenticatedError } from "../../errors.js";
import type { CredentialRef } from "../core/dial-context.js";

export interface AgentCredentials {
  /** Present only when the certificate chain was verified during the handshake. */
  verifiedCertificate: PeerCertificate | undefined;
  /** The token from `authorization: Bearer <token>`, if any. */
  bearerToken: string | undefined;
}

export interface AgentPrincipal {
  tenant: string;
  /** For logs and audit; never contains a secret. */
  identity: string;
  /** Set when the credential can be revoked while the agent is connected. */
  credential?: CredentialRef;
  /** The tenant credentials shown ("token:<id>", "cert:<serial>"): the status API's last use. */
  credentialIds?: readonly string[];
}

export type AgentAuthenticator = (creds: AgentCredentials) => AgentPrincipal;

export const DEFAULT_TENANT = "default";

export function hashToken(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** Parses a token file: one token per line; blank lines and `#` comments are ignored. */
export function parseTokenFile(text: string): string[] {
  return text
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
}

/** Compares against every stored hash, so timing reveals neither a match nor which one. */
function matchesAny(hashes: readonly Buffer[], token: string): boolean {
  const h = hashToken(token);
  let match = false;
  for (const stored of hashes) match = timingSafeEqual(stored, h) || match;
  return match;
}

/** Single-tenant authenticator: every authenticated agent belongs to tenant "default". */
export function staticAgentAuthenticator(opts: {
  tokenHashes: readonly Buffer[];
  acceptCertificates: boolean;
}): AgentAuthenticator {
  return ({ verifiedCertificate, bearerToken }) => {
    if (bearerToken !== undefined) {
      if (opts.tokenHashes.length > 0 && matchesAny(opts.tokenHashes, bearerToken)) {
        return { tenant: DEFAULT_TENANT, identity: "token" };
      }
      throw new UnauthenticatedError("invalid agent token");
    }
    if (opts.acceptCertificates && verifiedCertificate) {
      const cn = verifiedCertificate.subject?.CN;
      return { tenant: DEFAULT_TENANT, identity: `cert:${Array.isArray(cn) ? cn.join(",") : (cn ?? "")}` };
    }
    throw new UnauthenticatedError("agent presented no valid client certificate or bearer token");
  };
}
