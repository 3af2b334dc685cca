/**
 * The tenant model. A tenant is one cluster: its agents and the kube-apiservers of its control
 * plane, each proving who they are with a credential listed here. Records are immutable
 * snapshots (the store freezes what it returns); every change is a new record with the next
 * version, written with a condition on the previous one (lib/tenancy/store.ts).
 *
 * Times are ISO 8601 UTC strings ("2026-12-04T10:00:00.000Z"): the same text in memory, in the
 * file store and in DynamoDB, and readable by an operator.
 */

import type { EgressPolicy } from "../egress/egress-policy.js";
import type { TenantQuotas } from "./quotas.js";

/**
 * "deleted" is a tombstone: the record stays (with no credentials) so that watchers see the
 * deletion as a change like any other, and so that versions keep increasing if the id is used
 * again. A deleted tenant authenticates nothing.
 */
export type TenantState = "active" | "deleted";

/** What a credential lets its holder do; the role comes from the credential, never the port. */
export type CredentialRole = "agent" | "caller";
/** How the credential is presented: a bearer token, or a client certificate of the gateway CA. */
export type CredentialForm = "token" | "certificate";
/** One list of the record per kind: the role and the form together. */
export type CredentialKind = `${CredentialRole}-${CredentialForm}`;

/** In the order `kgw tenant show` lists them: by role, then tokens before certificates. */
export const CREDENTIAL_KINDS: readonly CredentialKind[] = [
  "agent-token",
  "agent-certificate",
  "caller-token",
  "caller-certificate",
];

export function credentialKind(role: CredentialRole, form: CredentialForm): CredentialKind {
  return `${role}-${form}`;
}

export interface CredentialBase {
  /** Unique within the tenant; not secret (shown by `kgw tenant show`, used by `revoke`). */
  readonly id: string;
  readonly createdAt: string;
  /**
   * End of validity other than revocation: set when the credential is rotated out (now plus the
   * grace period). null: valid until revoked (a certificate also ends at its notAfter).
   */
  readonly expiresAt: string | null;
  /** Set by `revoke`: refused from then on, grace or not. */
  readonly revokedAt: string | null;
}

/**
 * A bearer token (lib/tenancy/tokens.ts). Only its SHA-256 is stored: the token is 256 random
 * bits, so the hash cannot be reversed by guessing, and a leaked store yields no usable token.
 */
export interface TokenCredential extends CredentialBase {
  /** Hex SHA-256 of the whole token text. */
  readonly sha256: string;
}

/**
 * A client certificate the gateway's CA issued to the tenant, for one role. The id is the
 * certificate's serial number (lower-case hex, no leading zeros). The key was never stored.
 */
export interface CertificateCredential extends CredentialBase {
  /** RFC 4514 text of the subject, for people. */
  readonly subject: string;
  /** The URI SAN naming the tenant and the role (lib/tenancy/tenant-uri.ts). */
  readonly uri: string;
  readonly notAfter: string;
}

/**
 * An install token (`kgw_install_…`, lib/tenancy/install/): fetches the tenant's agent manifest
 * once (`GET /v1/install/<token>.yaml`), never authenticates an agent or a caller. It always
 * expires; a single-use one is spent by the same conditional write that mints the manifest's
 * agent token, so two fetches can never both get a manifest.
 */
export interface InstallToken extends TokenCredential {
  /** Required: an install link that never expires is a standing credential, not a link. */
  readonly expiresAt: string;
  /** Spent by its first successful fetch (the default); otherwise good until it expires. */
  readonly singleUse: boolean;
  /** The last successful fetch; for a single-use token, the one that spent it. */
  readonly usedAt: string | null;
}

/** Presented by the tenant's kube-apiservers (HTTPConnect over TCP with mTLS). */
export type CallerCertificate = CertificateCredential;
/** Presented by the tenant's agents instead of (or beside) an agent token. */
export type AgentCertificate = CertificateCredential;

export interface TenantRecord {
  readonly id: string;
  /** 1 for the first write of this id, then +1 per write (a re-created id continues counting). */
  readonly version: number;
  readonly displayName: string;
  readonly state: TenantState;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly agentTokens: readonly TokenCredential[];
  /** Optional for agents; records written before agent certificates existed read as []. */
  readonly agentCertificates: readonly AgentCertificate[];
  readonly callerTokens: readonly TokenCredential[];
  readonly callerCertificates: readonly CallerCertificate[];
  /**
   * Links to the agent manifest (`kgw tenant install-token`); not a CredentialKind, because they
   * authenticate no peer. Records written before install tokens existed read as [].
   */
  readonly installTokens: readonly InstallToken[];
  /**
   * Where the tenant's dials may go (lib/egress/egress-policy.ts). Records written before
   * policies existed read as DEFAULT_EGRESS_POLICY.
   */
  readonly egress: EgressPolicy;
  /**
   * The tenant's own quotas, over the server's defaults (lib/tenancy/quotas.ts); {} in records
   * written before quotas existed.
   */
  readonly quotas: TenantQuotas;
}

export type AnyCredential = TokenCredential | CertificateCredential;

/** The list of a record that holds credentials of `kind`. */
export function credentialsOf(record: TenantRecord, kind: CredentialKind): readonly AnyCredential[] {
  switch (kind) {
    case "agent-token":
      return record.agentTokens;
    case "agent-certificate":
      return record.agentCertificates;
    case "caller-token":
      return record.callerTokens;
    case "caller-certificate":
      return record.callerCertificates;
  }
}
