/**
 * Who is this caller? Told from what the connection proved: a client certificate verified against
 * --server-ca-cert during the TLS handshake, the Unix socket (its file permissions), or nothing at
 * all where a flag allows anonymous callers. A plain function, so tenancy replaces it with a
 * per-tenant lookup (a tenant in the certificate's URI SAN, a bearer token on CONNECT).
 */
import type { PeerCertificate } from "node:tls";
import { UnauthenticatedError } from "../../errors.js";
import type { CallerIdentity, CallerListener } from "../core/dial-context.js";
import { DEFAULT_TENANT } from "./agent-auth.js";

export interface CallerCredentials {
  listener: CallerListener;
  /** Present only when the TLS handshake verified the client certificate chain. */
  verifiedCertificate: PeerCertificate | undefined;
  /**
   * Every `Proxy-Authorization` value of a CONNECT request, or every `authorization` value of a
   * gRPC call's metadata.
   */
  authorization: readonly string[];
}

/** Throws UnauthenticatedError (401 / UNAUTHENTICATED) for a caller it does not accept. */
export type CallerAuthenticator = (creds: CallerCredentials) => CallerIdentity;

/** "cert:<CN>#<serial>": enough to find the certificate again, nothing secret. */
export function certificatePrincipal(cert: PeerCertificate): string {
  const cn = cert.subject?.CN;
  return `cert:${Array.isArray(cn) ? cn.join(",") : (cn ?? "")}#${cert.serialNumber ?? ""}`;
}

/**
 * The drop-in server: every caller belongs to tenant "default". A TLS caller must have shown a
 * verified certificate unless `anonymousCallers` (--allow-anonymous-callers, --insecure-frontend).
 */
export function singleTenantCallerAuthenticator(opts: { anonymousCallers: boolean }): CallerAuthenticator {
  return ({ listener, verifiedCertificate }) => {
    if (listener === "uds") return { tenant: DEFAULT_TENANT, principal: "uds", listener };
    if (verifiedCertificate) {
      return { tenant: DEFAULT_TENANT, principal: certificatePrincipal(verifiedCertificate), listener };
    }
    if (opts.anonymousCallers) return { tenant: DEFAULT_TENANT, principal: "anonymous", listener };
    throw new UnauthenticatedError("the caller presented no verified client certificate");
  };
}
