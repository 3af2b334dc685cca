/**
 * The one kgw URI SAN parser (lib/pki/kgw-uri.ts) and both of its readers, in one table: every
 * SAN list, hostile or not, read as a tenant identity (lib/tenancy/tenant-uri.ts) and as a fleet
 * peer's (lib/fleet/peer/peer-identity.ts). A row says what the parser returns, what the tenant
 * reader returns (a role, or a word of its refusal) and what the peer reader says (null when it
 * is a peer, or a word of its problem).
 */
import { describe, expect, it } from "vitest";
import { peerIdentityProblem } from "../../lib/fleet/peer/peer-identity.js";
import { type KgwUriRefusal, kgwUriOf } from "../../lib/pki/kgw-uri.js";
import { identityFromSubjectAltName } from "../../lib/tenancy/tenant-uri.js";

type Row = [
  what: string,
  san: string | undefined,
  parsed: string | KgwUriRefusal,
  tenant: { role: "caller" | "agent" } | { refused: string },
  peer: string | null,
];

const NOT_PEER = "is not kgw://fleet/peer";
const NO_PEER = "no kgw://fleet/peer";

const ROWS: Row[] = [
  // Read: exactly one kgw URI.
  [
    "only a caller URI",
    "URI:kgw://tenant/acme/caller",
    "kgw://tenant/acme/caller",
    { role: "caller" },
    NOT_PEER,
  ],
  [
    "only an agent URI",
    "URI:kgw://tenant/acme/agent",
    "kgw://tenant/acme/agent",
    { role: "agent" },
    NOT_PEER,
  ],
  [
    "our URI among other names",
    "DNS:api.example.com, IP Address:10.0.0.1, URI:kgw://tenant/acme/caller",
    "kgw://tenant/acme/caller",
    { role: "caller" },
    NOT_PEER,
  ],
  [
    "a quoted URI (as Node prints unusual values)",
    'URI:"kgw://tenant/acme/agent"',
    "kgw://tenant/acme/agent",
    { role: "agent" },
    NOT_PEER,
  ],
  [
    "another scheme next to ours",
    "URI:https://example.com/, URI:kgw://tenant/acme/agent",
    "kgw://tenant/acme/agent",
    { role: "agent" },
    NOT_PEER,
  ],
  ["the peer URI", "URI:kgw://fleet/peer", "kgw://fleet/peer", { refused: "not a tenant URI" }, null],
  [
    "the peer URI beside a DNS name",
    "DNS:gw-1.internal, URI:kgw://fleet/peer",
    "kgw://fleet/peer",
    { refused: "not a tenant URI" },
    null,
  ],
  [
    "an unknown role",
    "URI:kgw://tenant/acme/admin",
    "kgw://tenant/acme/admin",
    { refused: "not a tenant URI" },
    NOT_PEER,
  ],
  // Refused: no SANs.
  ["nothing", undefined, "no-san", { refused: "no subjectAltName" }, "no subjectAltName"],
  ["an empty list", "", "no-san", { refused: "no subjectAltName" }, "no subjectAltName"],
  // Refused: no kgw URI.
  ["no URI", "DNS:acme", "none", { refused: "no kgw URI SAN" }, NO_PEER],
  ["only a DNS name", "DNS:localhost", "none", { refused: "no kgw URI SAN" }, NO_PEER],
  // Node quotes a value holding ", ": the URI inside a DNS name stays part of that name.
  [
    "a URI smuggled inside a DNS name",
    'DNS:"x, URI:kgw://tenant/evil/agent"',
    "none",
    { refused: "no kgw URI SAN" },
    NO_PEER,
  ],
  [
    "the peer URI smuggled inside a DNS name",
    'DNS:"x, URI:kgw://fleet/peer"',
    "none",
    { refused: "no kgw URI SAN" },
    NO_PEER,
  ],
  ["no type", "kgw://tenant/acme/caller", "none", { refused: "no kgw URI SAN" }, NO_PEER],
  // Refused: more than one kgw URI, whatever they say.
  [
    "two tenants",
    "URI:kgw://tenant/acme/caller, URI:kgw://tenant/evil/caller",
    "several",
    { refused: "more than one" },
    "more than one",
  ],
  [
    "the same tenant twice",
    "URI:kgw://tenant/acme/caller, URI:kgw://tenant/acme/caller",
    "several",
    { refused: "more than one" },
    "more than one",
  ],
  [
    "both roles of one tenant",
    "URI:kgw://tenant/acme/caller, URI:kgw://tenant/acme/agent",
    "several",
    { refused: "more than one" },
    "more than one",
  ],
  [
    "a caller URI next to an upper-case agent URI",
    "URI:kgw://tenant/acme/caller, URI:KGW://tenant/acme/agent",
    "several",
    { refused: "more than one" },
    "more than one",
  ],
  [
    "the peer URI next to a tenant URI",
    "URI:kgw://fleet/peer, URI:kgw://tenant/acme/caller",
    "several",
    { refused: "more than one" },
    "more than one",
  ],
  // Refused: not Node's text form.
  [
    "an unterminated quote",
    'DNS:"x, URI:kgw://tenant/evil/caller',
    "unreadable",
    { refused: "unparseable" },
    "cannot be read",
  ],
  [
    "a bad escape",
    'URI:"\\x", URI:kgw://tenant/acme/caller',
    "unreadable",
    { refused: "unparseable" },
    "cannot be read",
  ],
];

describe("the kgw URI SAN of a certificate", () => {
  it.each(ROWS)("%s", (_what, san, parsed, tenant, peer) => {
    const read = kgwUriOf(san);
    expect(read).toEqual(parsed.includes("://") ? { ok: true, uri: parsed } : { ok: false, refusal: parsed });

    const identity = identityFromSubjectAltName(san);
    if ("role" in tenant) expect(identity).toEqual({ ok: true, tenantId: "acme", role: tenant.role });
    else {
      expect(identity.ok).toBe(false);
      expect(identity.ok ? "" : identity.reason).toContain(tenant.refused);
    }

    const problem = peerIdentityProblem(san);
    if (peer === null) expect(problem).toBeNull();
    else expect(problem).toContain(peer);
  });
});
