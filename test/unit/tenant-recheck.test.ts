/**
 * Asking again about a principal authenticated earlier, as the server does for its live tunnels
 * and agent streams after a store change or as time passes: every way a credential stops being
 * usable, for each of the four kinds, and the key live connections are grouped by.
 */
import { describe, expect, it } from "vitest";
import { INACTIVE_CREDENTIAL_RETENTION_MS } from "../../lib/tenancy/limits.js";
import { type CredentialKind, credentialsOf, type TenantRecord } from "../../lib/tenancy/model.js";
import {
  addAgentCertificate,
  addCallerCertificate,
  addToken,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import { agentUri, callerUri } from "../../lib/tenancy/tenant-uri.js";
import { generateToken } from "../../lib/tenancy/tokens.js";
import {
  authenticateToken,
  principalKey,
  recheckPrincipal,
  type TenantLookup,
  type TenantPrincipal,
} from "../../lib/tenancy/verify.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const at = (ms: number) => new Date(T0.getTime() + ms);
const NOT_AFTER = at(365 * DAY);

/** A tenant with one credential of every kind; certificates have fixed serials. */
function acme(): TenantRecord {
  let r = createTenantRecord({ id: "acme" }, undefined, T0);
  r = addToken(r, "agent-token", generateToken("agent", "acme"), T0);
  r = addToken(r, "caller-token", generateToken("caller", "acme"), T0);
  r = addAgentCertificate(
    r,
    { serial: "a1", subject: "CN=acme", uri: agentUri("acme"), notAfter: NOT_AFTER },
    T0,
  );
  r = addCallerCertificate(
    r,
    { serial: "c1", subject: "CN=acme", uri: callerUri("acme"), notAfter: NOT_AFTER },
    T0,
  );
  return { ...r, version: 1 };
}

const KINDS: readonly [CredentialKind, TenantPrincipal["role"], TenantPrincipal["credential"]][] = [
  ["agent-token", "agent", "token"],
  ["agent-certificate", "agent", "certificate"],
  ["caller-token", "caller", "token"],
  ["caller-certificate", "caller", "certificate"],
];

const principalOf = (record: TenantRecord, kind: CredentialKind): TenantPrincipal => {
  const [, role, credential] = KINDS.find(([k]) => k === kind)!;
  return { tenantId: record.id, role, credential, credentialId: credentialsOf(record, kind)[0]!.id };
};
const only =
  (record: TenantRecord | undefined): TenantLookup =>
  (id) =>
    record?.id === id ? record : undefined;

describe.each(KINDS)("re-checking a principal of a %s", (kind) => {
  const record = acme();
  const principal = principalOf(record, kind);
  const id = principal.credentialId;

  it("is still good while the credential is usable, and in its grace period", () => {
    expect(recheckPrincipal(only(record), principal, T0)).toBeUndefined();
    const graced: TenantRecord = {
      ...record,
      [listOf(kind)]: credentialsOf(record, kind).map((c) => ({ ...c, expiresAt: at(HOUR).toISOString() })),
    };
    expect(recheckPrincipal(only(graced), principal, at(HOUR - 1))).toBeUndefined();
    expect(recheckPrincipal(only(graced), principal, at(HOUR))).toBe("expired");
  });

  it("is revoked once the credential is", () => {
    expect(recheckPrincipal(only(revokeCredential(record, id, at(1))), principal, at(2))).toBe("revoked");
  });

  it("names the tenant gone, deleted, or deleted and created again", () => {
    expect(recheckPrincipal(only(undefined), principal, T0)).toBe("unknown-tenant");
    const tombstone = deleteTenantRecord(record, at(1));
    expect(recheckPrincipal(only(tombstone), principal, at(2))).toBe("tenant-deleted");
    // Same id, new tenant: its credentials are not the old one's.
    const again = createTenantRecord({ id: "acme" }, tombstone, at(3));
    expect(recheckPrincipal(only(again), principal, at(4))).toBe("unknown-credential");
  });

  it("refuses when the lookup answers with another tenant's record", () => {
    const globex = { ...createTenantRecord({ id: "globex" }, undefined, T0), version: 1 };
    expect(recheckPrincipal(() => globex, principal, T0)).toBe("unknown-tenant");
  });

  it("is unknown-credential once the credential is forgotten", () => {
    const revoked = revokeCredential(record, id, T0);
    const forgotten: TenantRecord = { ...revoked, [listOf(kind)]: [] };
    expect(recheckPrincipal(only(forgotten), principal, at(1))).toBe("unknown-credential");
  });

  it("looks only in the list its role and form name", () => {
    for (const [other, role, credential] of KINDS) {
      if (other === kind) continue;
      const moved = { ...principal, role, credential };
      // The other lists hold other ids: the same id asked about as another kind is not found.
      expect(recheckPrincipal(only(record), moved, T0)).toBe("unknown-credential");
    }
  });
});

describe("re-checking, as time passes", () => {
  it("ends a certificate principal at its notAfter with no change to the record", () => {
    const record = acme();
    for (const kind of ["agent-certificate", "caller-certificate"] as const) {
      const principal = principalOf(record, kind);
      expect(recheckPrincipal(only(record), principal, at(365 * DAY - 1))).toBeUndefined();
      expect(recheckPrincipal(only(record), principal, NOT_AFTER)).toBe("expired");
    }
  });

  it("forgets a token pruned after the retention period, while its replacement stays good", () => {
    let record = acme();
    const old = principalOf(record, "agent-token");
    record = revokeCredential(record, old.credentialId, T0);
    const fresh = generateToken("agent", "acme");
    record = addToken(record, "agent-token", fresh, at(INACTIVE_CREDENTIAL_RETENTION_MS + 1));
    const now = at(INACTIVE_CREDENTIAL_RETENTION_MS + 2);
    expect(recheckPrincipal(only(record), old, now)).toBe("unknown-credential");
    const current = authenticateToken(only(record), fresh.token, "agent", now);
    expect(recheckPrincipal(only(record), current, now)).toBeUndefined();
  });
});

describe("principal keys", () => {
  it("are one per credential: the same for every connection it opened, apart for every kind", () => {
    const base = { tenantId: "acme", credentialId: "a1" };
    const keys = KINDS.map(([, role, credential]) => principalKey({ ...base, role, credential }));
    expect(new Set(keys).size).toBe(KINDS.length);
    expect(principalKey({ ...base, role: "agent", credential: "certificate" })).toBe(
      "acme/agent/certificate/a1",
    );
    expect(principalKey({ ...base, role: "agent", credential: "certificate", tenantId: "globex" })).not.toBe(
      keys[1],
    );
  });
});

function listOf(kind: CredentialKind): keyof TenantRecord {
  const lists = {
    "agent-token": "agentTokens",
    "agent-certificate": "agentCertificates",
    "caller-token": "callerTokens",
    "caller-certificate": "callerCertificates",
  } as const;
  return lists[kind];
}
