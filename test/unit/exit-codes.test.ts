/** One exit-code table: failures map to it by their code, and docs/CONFIGURATION.md lists the same. */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { EXIT, exitCodeFor } from "../../lib/commands/exit-codes.js";
import { BadRequestError, ConfigError, DialFailedError, GatewayError } from "../../lib/errors.js";
import {
  CredentialAlreadyRevokedError,
  TenantExistsError,
  TenantNotFoundError,
  TenantStoreCorruptError,
  TenantStoreUnavailableError,
  TenantVersionConflictError,
} from "../../lib/tenancy/errors.js";

describe("exitCodeFor", () => {
  it.each([
    ["a configuration error", new ConfigError("--x: bad"), EXIT.USAGE],
    ["bad input", new BadRequestError("bad id"), EXIT.USAGE],
    ["a tenant not found", new TenantNotFoundError("tenant acme"), EXIT.NOT_FOUND],
    ["a tenant that exists", new TenantExistsError("acme"), EXIT.ALREADY],
    ["a credential revoked already", new CredentialAlreadyRevokedError("0123456789abcdef"), EXIT.ALREADY],
    ["a conflict that kept winning", new TenantVersionConflictError("acme", 3), EXIT.FAILED],
    ["a corrupt record", new TenantStoreCorruptError("tenants/acme.json", "not JSON"), EXIT.FAILED],
    ["an unreachable store", new TenantStoreUnavailableError("ECONNREFUSED"), EXIT.FAILED],
    ["a failure of the data path", new DialFailedError("refused"), EXIT.FAILED],
    ["something not ours", new Error("boom"), EXIT.FAILED],
    ["not even an Error", "boom", EXIT.FAILED],
  ])("%s exits %d", (_what, err, code) => {
    expect(exitCodeFor(err)).toBe(code);
  });

  it("not found and already revoked are told apart, and neither is a usage error", () => {
    const codes = [new TenantNotFoundError("x"), new CredentialAlreadyRevokedError("ab")].map(exitCodeFor);
    expect(new Set(codes).size).toBe(2);
    expect(codes).not.toContain(EXIT.USAGE);
    expect(new CredentialAlreadyRevokedError("ab")).toBeInstanceOf(GatewayError);
  });

  it("is the table docs/CONFIGURATION.md lists, code for code", () => {
    const doc = readFileSync(new URL("../../docs/CONFIGURATION.md", import.meta.url), "utf8");
    const section = doc.slice(doc.indexOf("## Exit codes"));
    const rows = [...section.matchAll(/^\| `(\d+)` +\| ([a-z ]+?) +\|/gm)].map((m) => [Number(m[1]), m[2]]);
    const table = Object.entries(EXIT).map(([name, code]) => [code, name.toLowerCase().replaceAll("_", " ")]);
    expect(rows).toEqual(table);
  });
});
