/** The stored form of tenant records: a round trip, and hostile or damaged bytes failing closed. */
import { describe, expect, it } from "vitest";
import { MAX_CREDENTIALS_PER_KIND, MAX_RECORD_BYTES } from "../../lib/tenancy/limits.js";
import type { TenantRecord } from "../../lib/tenancy/model.js";
import {
  addAgentCertificate,
  addCallerCertificate,
  addToken,
  createTenantRecord,
} from "../../lib/tenancy/operations.js";
import { decodeTenantRecord, encodeTenantRecord } from "../../lib/tenancy/record-codec.js";
import { agentUri, callerUri } from "../../lib/tenancy/tenant-uri.js";
import { generateToken } from "../../lib/tenancy/tokens.js";

const T0 = new Date("2026-12-04T10:00:00.000Z");
const SOURCE = { location: "tenants/acme.json", tenantId: "acme" };

function sample(): TenantRecord {
  let r = createTenantRecord({ id: "acme", displayName: "Acme" }, undefined, T0);
  r = addToken(r, "agent-token", generateToken("agent", "acme"), T0);
  r = addCallerCertificate(
    r,
    { serial: "4af3", subject: "CN=acme", uri: callerUri("acme"), notAfter: T0 },
    T0,
  );
  r = addAgentCertificate(
    r,
    { serial: "9b01", subject: "CN=acme, O=kgw:tenant-agent", uri: agentUri("acme"), notAfter: T0 },
    T0,
  );
  return { ...r, version: 1 };
}

const stored = (changes: Record<string, unknown>) => JSON.stringify({ schema: 1, ...sample(), ...changes });

function decodeError(text: string): { code?: string; message: string } | undefined {
  try {
    decodeTenantRecord(text, SOURCE);
  } catch (err) {
    return err as { code?: string; message: string };
  }
  return undefined;
}

describe("tenant records on storage", () => {
  it("round-trips and decodes to a frozen record", () => {
    const record = sample();
    const decoded = decodeTenantRecord(encodeTenantRecord(record), SOURCE);
    expect(decoded).toEqual(record);
    expect(Object.isFrozen(decoded.callerCertificates[0])).toBe(true);
  });

  const token = sample().agentTokens[0]!;
  const cert = sample().callerCertificates[0]!;
  const agentCert = sample().agentCertificates[0]!;
  it.each([
    ["not JSON", "{", "not valid JSON"],
    ["an array", "[]", "not a JSON object"],
    ["deep nesting", `${"[".repeat(30_000)}${"]".repeat(30_000)}`, ""],
    ["too large", stored({}).padEnd(MAX_RECORD_BYTES + 1, " "), "larger than"],
    ["another schema", stored({ schema: 2 }), "unknown schema"],
    ["no schema", JSON.stringify(sample()), "unknown schema"],
    ["an unknown field", stored({ role: "admin" }), "unknown field"],
    [
      "a __proto__ field",
      stored({}).replace('"schema":1', '"schema":1,"__proto__":{"x":1}'),
      "unknown field",
    ],
    ["a missing field", JSON.stringify({ schema: 1, ...sample(), callerTokens: undefined }), "missing field"],
    ["version 0", stored({ version: 0 }), "invalid version"],
    ["a fractional version", stored({ version: 1.5 }), "invalid version"],
    ["a string version", stored({ version: "1" }), "invalid version"],
    ["a version past 2^53", stored({ version: 2 ** 60 }), "invalid version"],
    ["an unknown state", stored({ state: "suspended" }), "invalid state"],
    ["a bad time", stored({ createdAt: "2026-13-45T99:00:00.000Z" }), "createdAt"],
    ["a local time", stored({ updatedAt: "2026-12-04T10:00:00.000+02:00" }), "updatedAt"],
    ["a display name with an escape", stored({ displayName: "\u001b[2J" }), "displayName"],
    [
      "a different id",
      stored({ id: "other", callerCertificates: [], agentCertificates: [] }),
      "location names",
    ],
    ["a deleted tenant with credentials", stored({ state: "deleted" }), "deleted tenant lists"],
    ["a duplicate token id", stored({ agentTokens: [token, token] }), "duplicate id"],
    ["a token with a bad hash", stored({ agentTokens: [{ ...token, sha256: "x" }] }), "invalid sha256"],
    ["a token with an extra field", stored({ agentTokens: [{ ...token, secret: "s" }] }), "unknown field"],
    [
      "a certificate for another tenant",
      stored({ callerCertificates: [{ ...cert, uri: callerUri("evil") }] }),
      "uri",
    ],
    [
      "a certificate with a padded serial",
      stored({ callerCertificates: [{ ...cert, id: "04af3" }] }),
      "serial",
    ],
    [
      "a caller certificate with an agent URI",
      stored({ callerCertificates: [{ ...cert, uri: agentUri("acme") }] }),
      "names the agent role, not caller",
    ],
    [
      "an agent certificate with a caller URI",
      stored({ agentCertificates: [{ ...agentCert, uri: callerUri("acme") }] }),
      "names the caller role, not agent",
    ],
    [
      "an agent certificate for another tenant",
      stored({ agentCertificates: [{ ...agentCert, uri: agentUri("evil") }] }),
      "agentCertificates[0]: uri does not name this tenant",
    ],
    ["agent certificates that are not a list", stored({ agentCertificates: null }), "not a list"],
    [
      "an agent certificate with an extra field",
      stored({ agentCertificates: [{ ...agentCert, key: "k" }] }),
      "unknown field",
    ],
    [
      "an agent certificate without notAfter",
      stored({ agentCertificates: [{ ...agentCert, notAfter: undefined }] }),
      "missing field notAfter",
    ],
    ["a token as an agent certificate", stored({ agentCertificates: [token] }), "agentCertificates[0]"],
    [
      "one serial as a caller and an agent certificate",
      stored({ agentCertificates: [{ ...agentCert, id: cert.id }] }),
      "duplicate id",
    ],
    [
      "a deleted tenant with agent certificates",
      stored({ state: "deleted", agentTokens: [], callerTokens: [], callerCertificates: [] }),
      "deleted tenant lists agentCertificates",
    ],
    [
      "33 agent certificates",
      stored({
        agentCertificates: Array.from({ length: 33 }, (_, i) => ({ ...agentCert, id: (i + 1).toString(16) })),
      }),
      "more than",
    ],
    [
      "33 tokens",
      stored({
        agentTokens: Array.from({ length: 33 }, (_, i) => ({
          ...token,
          id: i.toString(16).padStart(16, "0"),
        })),
      }),
      "more than",
    ],
  ])("refuses %s as ERR_STORE_CORRUPT", (_what, text, reason) => {
    const err = decodeError(text);
    expect(err?.code).toBe("ERR_STORE_CORRUPT");
    expect(err?.message).toContain("tenants/acme.json");
    expect(err?.message).toContain(reason);
    expect(err!.message.length).toBeLessThan(300);
  });

  it("reads a record written before agent certificates existed, as one with none", () => {
    const { agentCertificates: _none, ...old } = sample();
    const decoded = decodeTenantRecord(JSON.stringify({ schema: 1, ...old }), SOURCE);
    expect(decoded).toEqual({ ...old, agentCertificates: [] });
    expect(Object.isFrozen(decoded.agentCertificates)).toBe(true);
  });

  it("writes agent certificates only when there are some, so the previous version still reads the rest", () => {
    const without = { ...sample(), agentCertificates: [] };
    const text = encodeTenantRecord(without);
    expect(JSON.parse(text)).not.toHaveProperty("agentCertificates");
    expect(Object.keys(JSON.parse(text)).sort()).toEqual(
      ["schema", "id", "version", "displayName", "state", "createdAt", "updatedAt"]
        .concat(["agentTokens", "callerTokens", "callerCertificates"])
        .sort(),
    );
    expect(decodeTenantRecord(text, SOURCE)).toEqual(without);
    expect(JSON.parse(encodeTenantRecord(sample()))).toHaveProperty("agentCertificates");
  });

  it(`fits ${MAX_CREDENTIALS_PER_KIND} credentials of every kind, for the longest tenant id, in ${MAX_RECORD_BYTES} bytes`, () => {
    const id = `t${"x".repeat(61)}z`;
    const certificate = (i: number, role: "agent" | "caller") => ({
      // As long as our issuer's serials (32 hex digits), made distinct.
      serial: `${role === "agent" ? "3" : "2"}${i.toString(16).padStart(31, "f")}`,
      subject: `CN=${id}, O=kgw:tenant-${role}`,
      uri: role === "agent" ? agentUri(id) : callerUri(id),
      notAfter: T0,
    });
    let r = createTenantRecord({ id, displayName: "D".repeat(128) }, undefined, T0);
    for (let i = 0; i < MAX_CREDENTIALS_PER_KIND; i++) {
      r = addToken(r, "agent-token", generateToken("agent", id), T0);
      r = addToken(r, "caller-token", generateToken("caller", id), T0);
      r = addAgentCertificate(r, certificate(i, "agent"), T0);
      r = addCallerCertificate(r, certificate(i, "caller"), T0);
    }
    const text = encodeTenantRecord({ ...r, version: 1 });
    expect(Buffer.byteLength(text)).toBeLessThan(MAX_RECORD_BYTES);
  });

  it("refuses to encode what it would refuse to read", () => {
    expect(() => encodeTenantRecord({ ...sample(), version: 0 })).toThrow(
      expect.objectContaining({ code: "ERR_BAD_REQUEST" }),
    );
  });
});
