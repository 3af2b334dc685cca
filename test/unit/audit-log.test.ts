import { mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigError } from "../../lib/errors.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { openAuditLog } from "../../lib/server/audit/audit-log.js";
import { buildDialRecord, type DialAuditRecord } from "../../lib/server/audit/audit-record.js";
import { waitFor } from "../helpers/agent.js";
import { captureLogger } from "../helpers/gateway.js";

let dir: string;

beforeEach(() => {
  dir = mkdtempSync(path.join(tmpdir(), "kgw-audit-"));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function record(destination: string): DialAuditRecord {
  return buildDialRecord({
    endedAt: Date.now(),
    dialId: "2f1c9a4e-7b1d-4c3e-9a7f-0d5e6b8c1a2f",
    caller: { tenant: "acme", principal: "token:3f9c2a1b0d4e5f60", listener: "gateway" },
    frontend: "connect",
    instance: "gw-1",
    owner: "gw-1",
    agentId: "acme-agent",
    destination,
    outcome: "ok",
    code: null,
    bytesFromCaller: 1,
    bytesToCaller: 2,
    dialMs: 1,
    durationMs: 2,
  });
}

const lines = (file: string): DialAuditRecord[] =>
  readFileSync(file, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as DialAuditRecord);

describe("the audit log file", () => {
  it("is created 0600 and gets one JSON line per record, flushed by close", async () => {
    const file = path.join(dir, "audit.log");
    const { log } = captureLogger();
    const audit = await openAuditLog(file, { log, metrics: new ServerMetrics() });
    audit.write(record("a:1"));
    audit.write(record("b:2"));
    await audit.close();
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(lines(file).map((r) => r.destination)).toEqual(["a:1", "b:2"]);
    audit.write(record("late:3")); // after close: dropped, not thrown
  });

  it("is appended to, and an existing file readable by others gets a warning", async () => {
    const file = path.join(dir, "audit.log");
    writeFileSync(file, `${JSON.stringify(record("old:1"))}\n`, { mode: 0o644 });
    const { log, lines: logLines } = captureLogger();
    const audit = await openAuditLog(file, { log, metrics: new ServerMetrics() });
    audit.write(record("new:2"));
    await audit.close();
    expect(lines(file).map((r) => r.destination)).toEqual(["old:1", "new:2"]);
    expect(logLines.some((l) => l.includes("readable by users other than the server's"))).toBe(true);
  });

  it("is reopened by name after rotation moved it", async () => {
    const file = path.join(dir, "audit.log");
    const { log } = captureLogger();
    const audit = await openAuditLog(file, { log, metrics: new ServerMetrics() });
    audit.write(record("before:1"));
    // The first record must have reached the file before rotation moves it.
    await waitFor(() => readFileSync(file, "utf8").includes("before:1"), 2000, "first record written");
    renameSync(file, `${file}.1`);
    audit.reopen();
    audit.write(record("after:2"));
    await audit.close();
    expect(lines(`${file}.1`).map((r) => r.destination)).toEqual(["before:1"]);
    expect(lines(file).map((r) => r.destination)).toEqual(["after:2"]);
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it("that cannot be opened stops the server at start", async () => {
    const { log } = captureLogger();
    await expect(
      openAuditLog(path.join(dir, "missing", "audit.log"), { log, metrics: new ServerMetrics() }),
    ).rejects.toThrow(ConfigError);
  });
});
