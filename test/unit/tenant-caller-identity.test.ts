/**
 * Caller certificates: the tenant in the URI SAN, read from Node's text form of a real
 * certificate; hostile SAN lists; and the allowlist of serials in the tenant's record.
 */
import { X509Certificate } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { type CertificateAuthority, createCa } from "../../lib/pki/ca.js";
import {
  callerUri,
  normalizeSerial,
  tenantIdFromSubjectAltName,
  tenantIdOfCallerUri,
} from "../../lib/tenancy/caller-uri.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import {
  addCallerCertificate,
  createTenantRecord,
  deleteTenantRecord,
  revokeCredential,
} from "../../lib/tenancy/operations.js";
import { authenticateCallerCertificate } from "../../lib/tenancy/verify.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");

describe("caller URIs", () => {
  it("round-trips a tenant id", () => {
    expect(callerUri("acme-1")).toBe("kgw://tenant/acme-1/caller");
    expect(tenantIdOfCallerUri(callerUri("acme-1"))).toBe("acme-1");
  });

  it.each([
    "kgw://tenant/acme",
    "kgw://tenant/acme/agent",
    "kgw://tenant/acme/caller/",
    "kgw://tenant/acme/caller?x",
    "KGW://tenant/acme/caller",
    "kgw://tenant/../caller",
    "kgw://tenant/default/caller",
    "kgw://tenant/Acme/caller",
    "spiffe://tenant/acme/caller",
  ])("does not take %s for a caller URI", (uri) => {
    expect(tenantIdOfCallerUri(uri)).toBeUndefined();
  });
});

describe("the tenant named by a subjectAltName", () => {
  it.each([
    ["only our URI", "URI:kgw://tenant/acme/caller", "acme"],
    [
      "our URI among other names",
      "DNS:api.example.com, IP Address:10.0.0.1, URI:kgw://tenant/acme/caller",
      "acme",
    ],
    ["a quoted URI (as Node prints unusual values)", 'URI:"kgw://tenant/acme/caller"', "acme"],
    ["another scheme next to ours", "URI:https://example.com/, URI:kgw://tenant/acme/caller", "acme"],
  ])("reads %s", (_what, san, tenant) => {
    expect(tenantIdFromSubjectAltName(san)).toEqual({ ok: true, tenantId: tenant });
  });

  it.each([
    ["nothing", undefined, "no subjectAltName"],
    ["an empty list", "", "no subjectAltName"],
    ["no URI", "DNS:acme", "no kgw URI SAN"],
    ["two tenants", "URI:kgw://tenant/acme/caller, URI:kgw://tenant/evil/caller", "more than one"],
    ["the same tenant twice", "URI:kgw://tenant/acme/caller, URI:kgw://tenant/acme/caller", "more than one"],
    ["an agent URI", "URI:kgw://tenant/acme/agent", "not a caller URI"],
    [
      "a caller URI next to an agent URI",
      "URI:kgw://tenant/acme/caller, URI:KGW://tenant/acme/agent",
      "more than one",
    ],
    // Node quotes a value holding ", ": the URI inside a DNS name stays part of that name.
    ["a URI smuggled inside a DNS name", 'DNS:"x, URI:kgw://tenant/evil/caller"', "no kgw URI SAN"],
    ["an unterminated quote", 'DNS:"x, URI:kgw://tenant/evil/caller', "unparseable"],
    ["no type", "kgw://tenant/acme/caller", "no kgw URI SAN"],
    ["a bad escape", 'URI:"\\x", URI:kgw://tenant/acme/caller', "unparseable"],
  ])("refuses %s", (_what, san, reason) => {
    const result = tenantIdFromSubjectAltName(san);
    expect(result.ok).toBe(false);
    expect(result.ok ? "" : result.reason).toContain(reason);
  });
});

describe("authenticating a caller certificate", () => {
  let ca: CertificateAuthority;
  let acmeCert: X509Certificate;
  let acme: TenantRecord;
  const presented = (x: X509Certificate) => ({
    subjectaltname: x.subjectAltName,
    serialNumber: x.serialNumber,
  });

  beforeAll(async () => {
    ca = await createCa({ commonName: "kgw test gateway CA" });
    const issued = await ca.issue({ commonName: "acme", uris: [callerUri("acme")], usage: "client" });
    acmeCert = new X509Certificate(issued.certPem);
    acme = addCallerCertificate(
      createTenantRecord({ id: "acme" }, undefined, T0),
      {
        serial: normalizeSerial(acmeCert.serialNumber)!,
        subject: "CN=acme",
        uri: callerUri("acme"),
        notAfter: new Date(Date.parse(acmeCert.validTo)),
      },
      T0,
    );
  });

  const lookupOf =
    (...records: TenantRecord[]) =>
    (id: string) =>
      records.find((r) => r.id === id);
  const reasonOf = (fn: () => unknown) => {
    try {
      fn();
      return "accepted";
    } catch (err) {
      return (err as { reason: string }).reason;
    }
  };

  it("accepts a certificate whose URI names the tenant and whose serial the tenant lists", () => {
    expect(authenticateCallerCertificate(lookupOf(acme), presented(acmeCert), T0)).toEqual({
      tenantId: "acme",
      role: "caller",
      credential: "certificate",
      credentialId: normalizeSerial(acmeCert.serialNumber),
    });
  });

  it("matches serials however they are printed (case, leading zeros, colons)", () => {
    const serial = acmeCert.serialNumber;
    const spelled = `00${serial.toLowerCase().match(/../g)!.join(":")}`;
    expect(
      authenticateCallerCertificate(lookupOf(acme), { ...presented(acmeCert), serialNumber: spelled }, T0)
        .tenantId,
    ).toBe("acme");
  });

  it("refuses a certificate of the CA the tenant does not list (issued, never recorded)", async () => {
    const unlisted = new X509Certificate(
      (await ca.issue({ commonName: "acme", uris: [callerUri("acme")], usage: "client" })).certPem,
    );
    expect(reasonOf(() => authenticateCallerCertificate(lookupOf(acme), presented(unlisted), T0))).toBe(
      "unknown-credential",
    );
  });

  it("refuses another tenant's certificate for this tenant, and this one's for another", async () => {
    const evil = createTenantRecord({ id: "evil" }, undefined, T0);
    // acme's serial presented with evil's URI: evil does not list it.
    expect(
      reasonOf(() =>
        authenticateCallerCertificate(
          lookupOf(acme, evil),
          { subjectaltname: `URI:${callerUri("evil")}`, serialNumber: acmeCert.serialNumber },
          T0,
        ),
      ),
    ).toBe("unknown-credential");
    expect(reasonOf(() => authenticateCallerCertificate(lookupOf(evil), presented(acmeCert), T0))).toBe(
      "unknown-tenant",
    );
  });

  it("refuses a revoked certificate, one of a deleted tenant, and a malformed serial", () => {
    const serial = normalizeSerial(acmeCert.serialNumber)!;
    const revoked = revokeCredential(acme, serial, T0);
    expect(reasonOf(() => authenticateCallerCertificate(lookupOf(revoked), presented(acmeCert), T0))).toBe(
      "revoked",
    );
    const deleted = deleteTenantRecord(acme, T0);
    expect(reasonOf(() => authenticateCallerCertificate(lookupOf(deleted), presented(acmeCert), T0))).toBe(
      "tenant-deleted",
    );
    expect(
      reasonOf(() =>
        authenticateCallerCertificate(lookupOf(acme), { ...presented(acmeCert), serialNumber: "xyz" }, T0),
      ),
    ).toBe("malformed");
  });

  it("refuses a URI SAN the issuer would not encode", async () => {
    await expect(
      ca.issue({ commonName: "x", uris: ["kgw://tenant/a b/caller"], usage: "client" }),
    ).rejects.toThrow("invalid URI");
    await expect(ca.issue({ commonName: "x", uris: ["no-scheme"], usage: "client" })).rejects.toThrow(
      "invalid URI",
    );
  });
});
