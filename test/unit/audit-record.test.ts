import { describe, expect, it } from "vitest";
import type { ErrorCode } from "../../lib/errors.js";
import {
  AUDIT_DESTINATION_MAX_CHARS,
  AUDIT_NAME_MAX_CHARS,
  AUDIT_RECORD_MAX_BYTES,
  auditField,
  buildDialRecord,
  DIAL_OUTCOMES,
  type DialOutcome,
  type DialRecordInput,
  dialFailureOutcome,
  tunnelEndOutcome,
} from "../../lib/server/audit/audit-record.js";

const SECRET =
  "kgw_caller_acme_3f9c2a1b0d4e5f60_9b1d00000000000000000000000000000000000000000000000000000000beef";

function input(over: Partial<DialRecordInput> = {}): DialRecordInput {
  return {
    endedAt: Date.UTC(2026, 11, 4, 12, 0, 0, 250),
    dialId: "2f1c9a4e-7b1d-4c3e-9a7f-0d5e6b8c1a2f",
    caller: {
      tenant: "acme",
      principal: "token:3f9c2a1b0d4e5f60",
      listener: "gateway",
      // What a policy hangs on a caller: the builder must never read it.
      credential: { key: "acme/caller/token/3f9c2a1b0d4e5f60", token: SECRET } as { key: string },
    },
    frontend: "connect",
    instance: "gw-1",
    owner: "gw-2",
    agentId: "acme-agent",
    destination: "10.0.0.7:10250",
    outcome: "ok",
    code: null,
    bytesFromCaller: 120,
    bytesToCaller: 4096,
    dialMs: 1.234,
    durationMs: 5012.06,
    ...over,
  };
}

describe("the audit record of a dial", () => {
  it("names the egress rule or the quota, and its limit, that refused the dial", () => {
    const refused = buildDialRecord(
      input({
        outcome: "denied",
        code: "ERR_QUOTA",
        quota: "maxTunnels",
        limit: 2,
        agentId: null,
        owner: null,
      }),
    );
    expect(refused).toMatchObject({
      outcome: "denied",
      code: "ERR_QUOTA",
      rule: null,
      quota: "maxTunnels",
      limit: 2,
    });
    const denied = buildDialRecord(
      input({ outcome: "denied", code: "ERR_DESTINATION_NOT_ALLOWED", rule: "no_rule" }),
    );
    expect(denied).toMatchObject({ rule: "no_rule", quota: null, limit: null });
  });

  it("has exactly the documented fields, times in ISO 8601 and milliseconds to a tenth", () => {
    expect(buildDialRecord(input())).toEqual({
      time: "2026-12-04T12:00:00.250Z",
      dialId: "2f1c9a4e-7b1d-4c3e-9a7f-0d5e6b8c1a2f",
      tenant: "acme",
      principal: "token:3f9c2a1b0d4e5f60",
      listener: "gateway",
      frontend: "connect",
      instance: "gw-1",
      owner: "gw-2",
      agentId: "acme-agent",
      destination: "10.0.0.7:10250",
      outcome: "ok",
      code: null,
      rule: null,
      quota: null,
      limit: null,
      bytesFromCaller: 120,
      bytesToCaller: 4096,
      dialMs: 1.2,
      durationMs: 5012.1,
    });
  });

  it("never carries what the caller's credential holds", () => {
    const line = JSON.stringify(buildDialRecord(input()));
    expect(line).not.toContain(SECRET);
    expect(line).not.toContain("9b1d");
    expect(line).not.toMatch(/credential|authorization|token":/i);
  });

  it("has no agent when none was chosen, and a code unless the outcome is ok", () => {
    const r = buildDialRecord(input({ agentId: null, outcome: "unavailable", code: "ERR_NO_AGENT" }));
    expect(r.agentId).toBeNull();
    expect(r.code).toBe("ERR_NO_AGENT");
    expect(buildDialRecord(input({ outcome: "ok", code: "ERR_DIAL_FAILED" })).code).toBeNull();
  });

  it.each<[ErrorCode | null, DialOutcome]>([
    [null, "failed"],
    ["ERR_DIAL_FAILED", "refused"],
    ["ERR_DIAL_TIMEOUT", "timeout"],
    ["ERR_DEADLINE_EXCEEDED", "timeout"],
    ["ERR_DIAL_CANCELLED", "cancelled"],
    ["ERR_NO_AGENT", "unavailable"],
    ["ERR_AGENT_GONE", "unavailable"],
    ["ERR_SHUTTING_DOWN", "unavailable"],
    ["ERR_DRAINED", "drained"],
    ["ERR_FORBIDDEN", "denied"],
    ["ERR_DESTINATION_NOT_ALLOWED", "denied"],
    ["ERR_QUOTA", "denied"],
    ["ERR_UNAUTHENTICATED", "denied"],
    ["ERR_PROTOCOL", "failed"],
    ["ERR_BAD_REQUEST", "failed"],
  ])("a dial failing with %s is %s", (code, outcome) => {
    expect(dialFailureOutcome(code)).toBe(outcome);
  });

  it.each<[ErrorCode | null, DialOutcome]>([
    [null, "ok"],
    ["ERR_DRAINED", "drained"],
    ["ERR_AGENT_GONE", "broken"],
    ["ERR_SHUTTING_DOWN", "broken"],
    ["ERR_CONNECTION_BROKEN", "broken"],
  ])("an established tunnel ending with %s is %s", (code, outcome) => {
    expect(tunnelEndOutcome(code)).toBe(outcome);
  });

  it("every outcome is one of the documented ones, and each can be recorded", () => {
    for (const outcome of DIAL_OUTCOMES) {
      const r = buildDialRecord(input({ outcome, code: outcome === "ok" ? null : "ERR_DIAL_FAILED" }));
      expect(r.outcome).toBe(outcome);
    }
    expect(new Set(DIAL_OUTCOMES).size).toBe(9);
  });
});

describe("strings a peer chose are bounded", () => {
  it("cuts a long destination and marks the cut", () => {
    const r = buildDialRecord(input({ destination: `${"a".repeat(10_000)}:443` }));
    expect(r.destination).toHaveLength(AUDIT_DESTINATION_MAX_CHARS);
    expect(r.destination.endsWith("…")).toBe(true);
  });

  it("cuts principals and agent IDs to the name bound", () => {
    const r = buildDialRecord(
      input({
        agentId: "x".repeat(1000),
        caller: { ...input().caller, principal: `cert:${"c".repeat(500)}#1` },
      }),
    );
    expect(r.agentId).toHaveLength(AUDIT_NAME_MAX_CHARS);
    expect(r.principal).toHaveLength(AUDIT_NAME_MAX_CHARS);
  });

  it("never keeps half of a surrogate pair", () => {
    const cut = auditField(`${"a".repeat(8)}😀😀`, 10);
    expect(cut).toBe(`${"a".repeat(8)}…`);
    expect(auditField("ab😀cd", 10)).toBe("ab😀cd");
  });

  it("replaces control characters and lone surrogates (no terminal escapes, no six-byte escapes)", () => {
    expect(auditField("evil\u001b[31m\r\nhost\u0085:1", 100)).toBe("evil\ufffd[31m\ufffd\ufffdhost\ufffd:1");
    expect(auditField("a\ud800b\udc00c", 100)).toBe("a\ufffdb\ufffdc");
  });

  it.each([
    ["control characters", "\u0001"],
    ["quotes", '"'],
    ["backslashes", "\\"],
    ["three-byte characters", "€"],
    ["astral characters", "😀"],
    ["lone surrogates", "\udc00"],
  ])("a record whose every string is made of %s stays within its bound", (_what, unit) => {
    const huge = unit.repeat(100_000);
    const line = `${JSON.stringify(
      buildDialRecord(
        input({
          dialId: huge,
          caller: { tenant: huge, principal: huge, listener: "gateway" },
          instance: huge,
          owner: huge,
          agentId: huge,
          destination: huge,
          outcome: "cancelled",
          code: "ERR_DESTINATION_NOT_ALLOWED",
          rule: huge,
          quota: huge,
          limit: Number.MAX_SAFE_INTEGER,
          bytesFromCaller: Number.MAX_SAFE_INTEGER,
          bytesToCaller: Number.MAX_SAFE_INTEGER,
          dialMs: 1e15,
          durationMs: 1e15,
        }),
      ),
    )}\n`;
    expect(Buffer.byteLength(line)).toBeLessThanOrEqual(AUDIT_RECORD_MAX_BYTES);
  });
});
