/**
 * Hosted mode's policy: every peer is some tenant's, proven by a credential from the tenant store
 * (lib/tenancy). Lookups read the watched snapshot, so a handshake does no I/O; the role comes
 * from the credential, never from the port: an agent token or certificate cannot open a caller's
 * stream, a caller's cannot register an agent.
 *
 * Authentication happens when a stream or tunnel opens. What it opened is registered with the
 * credential (LiveCredentials); each distinct credential with something open is checked again
 * after every change the watch reports and every `recheckIntervalMs` (a grace period or a
 * certificate's notAfter runs out without any change to the store), and everything opened with a
 * credential that is no longer valid is closed. A revocation therefore takes effect on live
 * tunnels within the watch interval plus one read.
 */
import type { PeerCertificate } from "node:tls";
import {
  BadRequestError,
  CredentialRevokedError,
  type GatewayError,
  ProxyAuthRequiredError,
  UnauthenticatedError,
} from "../../errors.js";
import type { ServerMetrics } from "../../metrics/server-metrics.js";
import type { Logger } from "../../observability/logger.js";
import { BEARER_PREFIX } from "../../proto/headers.js";
import type { RefusalReason } from "../../tenancy/errors.js";
import type { TenantQuotas } from "../../tenancy/quotas.js";
import type { TenantWatch } from "../../tenancy/store.js";
import {
  authenticateAgentCertificate,
  authenticateCallerCertificate,
  authenticateToken,
  principalKey,
  recheckPrincipal,
  type TenantLookup,
  type TenantPrincipal,
} from "../../tenancy/verify.js";
import type { CredentialHold, CredentialRef } from "../core/dial-context.js";
import type { AgentAuthenticator } from "./agent-auth.js";
import { type CallerAuthenticator, certificatePrincipal } from "./caller-auth.js";
import { egressAuthorizer } from "./egress-authorizer.js";
import type { GatewayPolicy } from "./gateway-policy.js";
import { LiveCredentials } from "./live-credentials.js";
import { tenantQuotas } from "./tenant-quotas.js";

export interface TenantPolicyOptions {
  watch: TenantWatch;
  /** The tenant whose callers the Unix socket serves (null: no socket). */
  udsTenant: string | null;
  /** Live credentials are checked again this often even when the store has not changed. */
  recheckIntervalMs: number;
  /** Every tenant's quotas unless its record sets its own. */
  defaultQuotas: Required<TenantQuotas>;
  log: Logger;
  metrics: ServerMetrics;
  now?: () => Date;
}

export interface TenantPolicy extends GatewayPolicy {
  /** Stops re-checking; what is open stays open. The watch is its owner's to close. */
  close(): void;
  /** Distinct credentials with streams or tunnels open, and how many: for tests and metrics. */
  readonly live: { readonly credentials: number; readonly holders: number };
}

/** A tenant credential something was opened with, and how to check it again. */
class TenantCredential implements CredentialRef {
  readonly key: string;

  /** `principal` null: the Unix socket, whose tenant is configuration, not a credential. */
  private constructor(
    readonly tenantId: string,
    readonly role: "agent" | "caller",
    readonly principal: TenantPrincipal | null,
  ) {
    this.key = principal ? principalKey(principal) : `${tenantId}/caller/uds`;
  }

  static of(principal: TenantPrincipal): TenantCredential {
    return new TenantCredential(principal.tenantId, principal.role, principal);
  }

  static uds(tenantId: string): TenantCredential {
    return new TenantCredential(tenantId, "caller", null);
  }

  recheck(lookup: TenantLookup, now: Date): RefusalReason | undefined {
    if (this.principal) return recheckPrincipal(lookup, this.principal, now);
    return tenantUsable(lookup, this.tenantId);
  }

  /** For logs: "token:<id>", "cert:<serial>" or "uds". */
  get credentialId(): string {
    return this.principal
      ? `${this.principal.credential === "token" ? "token" : "cert"}:${this.principal.credentialId}`
      : "uds";
  }
}

/**
 * A certificate and a token shown together (both checked, both the same tenant's): what they
 * opened was authenticated by each, so it is held under each, and whichever is revoked first
 * closes it. Holding it under one of them only would let the other's revocation pass unseen.
 */
class CredentialPair implements CredentialRef {
  readonly key: string;

  constructor(readonly parts: readonly [TenantCredential, TenantCredential]) {
    this.key = `${parts[0].key}+${parts[1].key}`;
  }
}

/** The ids of the credentials shown, for the status API's last use (nothing secret). */
function credentialIdsOf(byCert: TenantPrincipal | undefined, byToken: TenantPrincipal | undefined) {
  return [byCert, byToken].flatMap((p) => (p ? [TenantCredential.of(p).credentialId] : []));
}

/** What a peer that showed `byCert` and/or `byToken` is held under. */
function credentialOf(byCert: TenantPrincipal | undefined, byToken: TenantPrincipal | undefined) {
  if (byCert && byToken)
    return new CredentialPair([TenantCredential.of(byCert), TenantCredential.of(byToken)]);
  return TenantCredential.of((byCert ?? byToken)!);
}

function tenantUsable(lookup: TenantLookup, tenantId: string): RefusalReason | undefined {
  const record = lookup(tenantId);
  if (!record) return "unknown-tenant";
  return record.state === "deleted" ? "tenant-deleted" : undefined;
}

const NOTHING_HELD = () => {};

/**
 * The bearer token of an `authorization` (gRPC) or `Proxy-Authorization` (CONNECT) header, if
 * one was sent. Only the Bearer scheme is accepted: a Basic value would be a password we have
 * no use for, and it must never be taken for a token.
 */
function bearerToken(values: readonly string[]): string | undefined {
  if (values.length === 0) return undefined;
  if (values.length > 1) throw new BadRequestError("more than one authorization header");
  const value = values[0]!.trim();
  if (value.slice(0, BEARER_PREFIX.length).toLowerCase() !== BEARER_PREFIX.toLowerCase()) {
    throw new ProxyAuthRequiredError("only the Bearer scheme is accepted, with a caller token");
  }
  return value.slice(BEARER_PREFIX.length).trim();
}

/** Both credentials, if both were shown, must be the same tenant's: a mix is refused, not resolved. */
function sameTenant(
  a: TenantPrincipal | undefined,
  b: TenantPrincipal | undefined,
): TenantPrincipal | undefined {
  if (a && b && a.tenantId !== b.tenantId) {
    throw new UnauthenticatedError("the certificate and the token belong to different tenants");
  }
  return a ?? b;
}

function certificateOf(cert: PeerCertificate) {
  return { subjectaltname: cert.subjectaltname, serialNumber: cert.serialNumber };
}

export function tenantPolicy(o: TenantPolicyOptions): TenantPolicy {
  const lookup: TenantLookup = (id) => o.watch.get(id);
  const now = o.now ?? (() => new Date());
  const live = new LiveCredentials<TenantCredential>();
  const log = o.log.child({ component: "tenant-policy" });

  const authenticateAgent: AgentAuthenticator = ({ verifiedCertificate, bearerToken: token }) => {
    const at = now();
    // A verified certificate is a claim too: a caller's certificate on the connection refuses
    // the agent stream even with a valid agent token beside it.
    const byCert = verifiedCertificate
      ? authenticateAgentCertificate(lookup, certificateOf(verifiedCertificate), at)
      : undefined;
    const byToken = token === undefined ? undefined : authenticateToken(lookup, token, "agent", at);
    const principal = sameTenant(byToken, byCert);
    if (!principal) {
      throw new UnauthenticatedError(
        "an agent must present its tenant's agent token (authorization: Bearer) or agent certificate",
      );
    }
    return {
      tenant: principal.tenantId,
      identity: TenantCredential.of(principal).credentialId,
      credential: credentialOf(byCert, byToken),
      credentialIds: credentialIdsOf(byCert, byToken),
    };
  };

  const authenticateCaller: CallerAuthenticator = ({ listener, verifiedCertificate, authorization }) => {
    if (listener === "uds") {
      const tenant = o.udsTenant;
      // Configuration guarantees a tenant for the socket; a deleted one serves nobody.
      if (tenant === null || tenantUsable(lookup, tenant) !== undefined) {
        throw new UnauthenticatedError("the Unix socket's tenant does not exist or was deleted");
      }
      return { tenant, principal: "uds", listener, credential: TenantCredential.uds(tenant) };
    }
    const at = now();
    const byCert = verifiedCertificate
      ? authenticateCallerCertificate(lookup, certificateOf(verifiedCertificate), at)
      : undefined;
    const token = bearerToken(authorization);
    const byToken = token === undefined ? undefined : authenticateToken(lookup, token, "caller", at);
    const principal = sameTenant(byToken, byCert);
    if (!principal) {
      throw new ProxyAuthRequiredError(
        "a tenant's caller credential is required: a client certificate, or a caller token as Bearer (Proxy-Authorization on CONNECT)",
      );
    }
    return {
      tenant: principal.tenantId,
      // With both shown, the token names the caller; both are held for revocation.
      principal:
        byToken || !verifiedCertificate
          ? `token:${principal.credentialId}`
          : certificatePrincipal(verifiedCertificate),
      listener,
      credential: credentialOf(byCert, byToken),
      credentialIds: credentialIdsOf(byCert, byToken),
    };
  };

  const hold: CredentialHold = (credential, close) => {
    if (credential instanceof TenantCredential) return live.hold(credential, close);
    if (!(credential instanceof CredentialPair)) return NOTHING_HELD;
    // Closed once, by whichever credential goes first; its hold on the other goes with it, so a
    // pass that refuses both (a deletion) closes and counts it once.
    let releases: (() => void)[] = [];
    const release = () => {
      for (const r of releases) r();
    };
    const closeOnce = (err: GatewayError) => {
      release();
      close(err);
    };
    releases = credential.parts.map((part) => live.hold(part, closeOnce));
    return release;
  };

  const recheck = () => {
    const at = now();
    for (const ref of live.refs()) {
      const reason = ref.recheck(lookup, at);
      if (reason === undefined) continue;
      const closed = live.revoke(ref.key, new CredentialRevokedError(reason));
      o.metrics.revokedStreams.inc({ role: ref.role }, closed);
      log.info(
        { tenant: ref.tenantId, role: ref.role, credential: ref.credentialId, reason, closed },
        "closed what a credential that is no longer valid had open",
      );
    }
  };
  const onStoreError = (err: Error) => {
    o.metrics.tenantStoreErrors.inc();
    log.warn({ err: err.message }, "tenant store read failed: serving from the last known records");
  };
  o.watch.on("change", recheck);
  o.watch.on("error", onStoreError);
  const timer = setInterval(recheck, o.recheckIntervalMs);
  timer.unref();

  return {
    authenticateAgent,
    authenticateCaller,
    // Tenants are kept apart by the agent directory (a dial reaches its own tenant's agents
    // only); within its tenant, a dial goes only where the tenant's egress policy allows.
    quotas: tenantQuotas({
      lookup,
      defaults: o.defaultQuotas,
      refused: (quota) => o.metrics.quotaRefusals.inc({ quota }),
    }),
    authorizeDial: egressAuthorizer({
      lookup,
      refused: (rule) => o.metrics.egressRefusals.inc({ rule }),
    }),
    hold,
    live,
    close: () => {
      clearInterval(timer);
      o.watch.off("change", recheck);
      o.watch.off("error", onStoreError);
    },
  };
}
