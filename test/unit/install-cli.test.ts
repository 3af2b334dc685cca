/** `kgw tenant install-token` and the server's install flags: parsing, defaults, refusals. */
import { describe, expect, it } from "vitest";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { parseServerOptions } from "../../lib/config/server-options.js";

const ENV = { KGW_TENANT_STORE_DIR: "/var/lib/kgw", KGW_GATEWAY_ADDRESS: "gw.example.com:8132" };

function installCommand(argv: string[], env: Record<string, string> = ENV) {
  const parsed = parseTenantCommand(["install-token", "acme", ...argv], env);
  if (parsed.help || parsed.command.name !== "install-token") throw new Error("not install-token");
  return parsed.command;
}

describe("kgw tenant install-token", () => {
  it("defaults to a single-use link for 24 hours, with the curl variant when a CA is known", () => {
    const c = installCommand([]);
    expect(c.install).toMatchObject({ ttlMs: 86_400_000, singleUse: true, caBundle: null });
    expect(c.install.gateway.url).toBe("https://gw.example.com:8132");
    expect(installCommand(["--reusable", "--ttl=1h", "--ca-cert=ca.pem"]).install).toMatchObject({
      ttlMs: 3_600_000,
      singleUse: false,
      caBundle: "ca.pem",
    });
    expect(installCommand(["--ca-cert=ca.pem", "--server-ca-bundle=public.pem"]).install.caBundle).toBe(
      "public.pem",
    );
  });

  it.each([
    [["--ttl=721h"], /--ttl must be between/],
    [["--ttl=500ms"], /--ttl must be between/],
    [["--grace=1h"], /does not apply/],
    [["--gateway-address=nope"], /--gateway-address/],
  ])("refuses %j", (argv, message) => {
    expect(() => installCommand(argv)).toThrow(message);
  });

  it("needs the gateway's address for the line it prints", () => {
    expect(() => installCommand([], { KGW_TENANT_STORE_DIR: "/x" })).toThrow(/--gateway-address/);
  });
});

describe("kgw server --install-*", () => {
  const base = [
    "--cluster-cert=c.pem",
    "--cluster-key=k.pem",
    "--tenant-store-dir=/var/lib/kgw",
    "--tenant-ca-cert=ca.pem",
  ];
  const options = (argv: string[]) => {
    const parsed = parseServerOptions(argv, {});
    if (parsed.help) throw new Error("help");
    return parsed.options;
  };

  it("is off unless --install-gateway-address is given", () => {
    expect(options(base).tenancy?.install).toBeNull();
  });

  it("defaults the CA bundle to --tenant-ca-cert and the namespace to kgw-system", () => {
    const install = options([...base, "--install-gateway-address=gw.example.com:8132"]).tenancy?.install;
    expect(install).toMatchObject({ caBundle: "ca.pem", namespace: "kgw-system", image: undefined });
    expect(install?.gateway).toMatchObject({ host: "gw.example.com", port: 8132 });
  });

  it.each([
    [["--install-gateway-address=gw:8132"], /needs --tenant-store-dir/, false],
    [["--install-ca-bundle=x.pem"], /needs --install-gateway-address/, true],
    [["--install-namespace=other"], /needs --install-gateway-address/, true],
    [["--install-gateway-address=gw"], /--install-gateway-address/, true],
    [["--install-gateway-address=gw:8132", "--install-agent-image=kgw"], /--install-agent-image/, true],
    [["--install-gateway-address=gw:8132", "--install-namespace=Bad_NS"], /--install-namespace/, true],
  ])("refuses %j", (argv, message, tenantMode) => {
    const prefix = tenantMode ? base : ["--cluster-cert=c.pem", "--cluster-key=k.pem", "--agent-token=x"];
    expect(() => options([...prefix, ...argv])).toThrow(message);
  });
});
