/**
 * Tenant certificates, caller and agent: the tenant and role in the URI SAN, read from Node's
 * text form of real certificates (hostile SAN lists: kgw-uri.test.ts); a certificate of one role
 * presented for the other; and the allowlist of serials in the list of the tenant's record for
 * that role.
 */
import { X509Certificate } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { type CertificateAuthority, createCa } from "../../lib/pki/ca.js";
import type { CredentialRole, TenantRecord } from "../../lib/tenancy/model.js";
import {
  addAgentCertificate,
  addCallerCertificate,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import {
  agentUri,
  callerUri,
  normalizeSerial,
  parseTenantUri,
  tenantUri,
} from "../../lib/tenancy/tenant-uri.js";
import {
  authenticateAgentCertificate,
  authenticateCallerCertificate,
  type PresentedCertificate,
  type TenantLookup,
} from "../../lib/tenancy/verify.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");

describe("tenant URIs", () => {
  it("round-trips a tenant id and a role", () => {
    expect(callerUri("acme-1")).toBe("kgw://tenant/acme-1/caller");
    expect(agentUri("acme-1")).toBe("kgw://tenant/acme-1/agent");
    expect(parseTenantUri(callerUri("acme-1"))).toEqual({ tenantId: "acme-1", role: "caller" });
    expect(parseTenantUri(agentUri("acme-1"))).toEqual({ tenantId: "acme-1", role: "agent" });
    expect(tenantUri("acme", "agent")).toBe(agentUri("acme"));
  });

  it.each([
    "kgw://tenant/acme",
    "kgw://tenant/acme/admin",
    "kgw://tenant/acme/caller/",
    "kgw://tenant/acme/agent?x",
    "kgw://tenant/acme/Agent",
    "KGW://tenant/acme/caller",
    "kgw://tenant/../caller",
    "kgw://tenant/default/agent",
    "kgw://tenant/Acme/caller",
    "spiffe://tenant/acme/agent",
  ])("does not take %s for a tenant URI", (uri) => {
    expect(parseTenantUri(uri)).toBeUndefined();
  });
});

const presented = (x: X509Certificate): PresentedCertificate => ({
  subjectaltname: x.subjectAltName,
  serialNumber: x.serialNumber,
});
const lookupOf =
  (...records: TenantRecord[]): TenantLookup =>
  (id) =>
    records.find((r) => r.id === id);
const reasonOf = (fn: () => unknown) => {
  try {
    fn();
    return "accepted";
  } catch (err) {
    return (err as { reason: string }).reason;
  }
};

const AUTHENTICATE = { caller: authenticateCallerCertificate, agent: authenticateAgentCertificate } as const;
const ADD = { caller: addCallerCertificate, agent: addAgentCertificate } as const;
const OTHER: Record<CredentialRole, CredentialRole> = { caller: "agent", agent: "caller" };

describe.each(["caller", "agent"] as const)("authenticating a %s certificate", (role) => {
  const authenticate = AUTHENTICATE[role];
  let ca: CertificateAuthority;
  let acmeCert: X509Certificate;
  let acme: TenantRecord;

  /** A real certificate of the CA for `tenant` in `r`, as `kgw tenant` issues it. */
  const issue = async (tenant: string, r: CredentialRole = role, uris = [tenantUri(tenant, r)]) =>
    new X509Certificate((await ca.issue({ commonName: tenant, uris, usage: "client" })).certPem);
  const listed = (record: TenantRecord, cert: X509Certificate, r: CredentialRole = role) =>
    ADD[r](
      record,
      {
        serial: normalizeSerial(cert.serialNumber)!,
        subject: cert.subject,
        uri: tenantUri(record.id, r),
        notAfter: new Date(Date.parse(cert.validTo)),
      },
      T0,
    );

  beforeAll(async () => {
    ca = await createCa({ commonName: "kgw test gateway CA" });
    acmeCert = await issue("acme");
    acme = listed(createTenantRecord({ id: "acme" }, undefined, T0), acmeCert);
  });

  it("accepts a certificate whose URI names the tenant and role and whose serial that list holds", () => {
    expect(authenticate(lookupOf(acme), presented(acmeCert), T0)).toEqual({
      tenantId: "acme",
      role,
      credential: "certificate",
      credentialId: normalizeSerial(acmeCert.serialNumber),
    });
  });

  it("matches serials however they are printed (case, leading zeros, colons)", () => {
    const spelled = `00${acmeCert.serialNumber.toLowerCase().match(/../g)!.join(":")}`;
    expect(authenticate(lookupOf(acme), { ...presented(acmeCert), serialNumber: spelled }, T0).tenantId).toBe(
      "acme",
    );
  });

  it(`refuses a certificate of the other role as wrong-role, even when the tenant lists it`, async () => {
    const other = OTHER[role];
    const otherCert = await issue("acme", other);
    // Listed in the other role's list: usable there, never here.
    const both = listed(acme, otherCert, other);
    expect(AUTHENTICATE[other](lookupOf(both), presented(otherCert), T0).role).toBe(other);
    expect(reasonOf(() => authenticate(lookupOf(both), presented(otherCert), T0))).toBe("wrong-role");
    // And this role's certificate is refused by the other role's check.
    expect(reasonOf(() => AUTHENTICATE[other](lookupOf(both), presented(acmeCert), T0))).toBe("wrong-role");
  });

  it("refuses a serial that is listed only in the other role's list", () => {
    // The lists are apart: a serial allowlisted for one role does not let its certificate act
    // as the other, whatever the record says.
    const inOtherList = listed(createTenantRecord({ id: "acme" }, undefined, T0), acmeCert, OTHER[role]);
    expect(reasonOf(() => authenticate(lookupOf(inOtherList), presented(acmeCert), T0))).toBe(
      "unknown-credential",
    );
  });

  it("refuses a certificate with two URIs, even both for this tenant and role", async () => {
    const twice = await issue("acme", role, [tenantUri("acme", role), tenantUri("acme", role)]);
    const twoTenants = await issue("acme", role, [tenantUri("acme", role), tenantUri("evil", role)]);
    const record = listed(listed(acme, twice), twoTenants);
    for (const cert of [twice, twoTenants]) {
      expect(cert.subjectAltName).toContain(", URI:");
      expect(reasonOf(() => authenticate(lookupOf(record), presented(cert), T0))).toBe("malformed");
    }
  });

  it("refuses a certificate of the CA the tenant does not list (issued, never recorded)", async () => {
    const unlisted = await issue("acme");
    expect(reasonOf(() => authenticate(lookupOf(acme), presented(unlisted), T0))).toBe("unknown-credential");
  });

  it("refuses tenant A's certificate checked against tenant B's record, and A's serial under B's URI", () => {
    const evil = createTenantRecord({ id: "evil" }, undefined, T0);
    expect(reasonOf(() => authenticate(lookupOf(evil), presented(acmeCert), T0))).toBe("unknown-tenant");
    // A lookup that answers with the wrong record must not make it right either.
    expect(reasonOf(() => authenticate(() => evil, presented(acmeCert), T0))).toBe("unknown-credential");
    expect(
      reasonOf(() =>
        authenticate(
          lookupOf(acme, evil),
          { subjectaltname: `URI:${tenantUri("evil", role)}`, serialNumber: acmeCert.serialNumber },
          T0,
        ),
      ),
    ).toBe("unknown-credential");
  });

  it("refuses a revoked certificate, one of a deleted tenant, one past notAfter, and a malformed serial", () => {
    const serial = normalizeSerial(acmeCert.serialNumber)!;
    expect(
      reasonOf(() => authenticate(lookupOf(revokeCredential(acme, serial, T0)), presented(acmeCert), T0)),
    ).toBe("revoked");
    expect(
      reasonOf(() => authenticate(lookupOf(deleteTenantRecord(acme, T0)), presented(acmeCert), T0)),
    ).toBe("tenant-deleted");
    const afterNotAfter = new Date(Date.parse(acmeCert.validTo) + 1000);
    expect(reasonOf(() => authenticate(lookupOf(acme), presented(acmeCert), afterNotAfter))).toBe("expired");
    expect(
      reasonOf(() => authenticate(lookupOf(acme), { ...presented(acmeCert), serialNumber: "xyz" }, T0)),
    ).toBe("malformed");
  });
});

describe("certificate issuance", () => {
  it("refuses a URI SAN the issuer would not encode", async () => {
    const ca = await createCa({ commonName: "kgw test gateway CA" });
    await expect(
      ca.issue({ commonName: "x", uris: ["kgw://tenant/a b/caller"], usage: "client" }),
    ).rejects.toThrow("invalid URI");
    await expect(ca.issue({ commonName: "x", uris: ["no-scheme"], usage: "client" })).rejects.toThrow(
      "invalid URI",
    );
  });
});
