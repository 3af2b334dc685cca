import { describe, expect, it } from "vitest";
import { parseServerOptions } from "../../lib/config/server-options.js";
import { ConfigError } from "../../lib/errors.js";

const base = ["--uds-name=/tmp/k.sock", "--cluster-cert=c.pem", "--cluster-key=c-key.pem", "--agent-token=t"];

function parse(argv: string[]) {
  const r = parseServerOptions([...base, ...argv], {});
  if (r.help) throw new Error("help");
  return r.options;
}

describe("kgw server's audit and tenant-metrics flags", () => {
  it("audit nothing and label 1000 tenants by default", () => {
    const o = parse([]);
    expect(o.auditLog).toBeNull();
    expect(o.tenantMetricsLimit).toBe(1000);
  });

  it("take a file or - for stdout", () => {
    expect(parse(["--audit-log=/var/log/kgw/audit.log"]).auditLog).toBe("/var/log/kgw/audit.log");
    expect(parse(["--audit-log=-"]).auditLog).toBe("-");
  });

  it.each(["-1", "100001"])("refuse --tenant-metrics-limit=%s", (n) => {
    expect(() => parse([`--tenant-metrics-limit=${n}`])).toThrow(ConfigError);
  });

  it("take 0 (every tenant under _other)", () => {
    expect(parse(["--tenant-metrics-limit=0"]).tenantMetricsLimit).toBe(0);
  });
});
