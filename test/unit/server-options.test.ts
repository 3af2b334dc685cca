import { describe, expect, it } from "vitest";
import { parseDuration } from "../../lib/config/duration.js";
import { parseServerOptions } from "../../lib/config/server-options.js";
import { ConfigError } from "../../lib/errors.js";

const base = [
  "--server-cert=s.pem",
  "--server-key=s-key.pem",
  "--server-ca-cert=ca.pem",
  "--cluster-cert=c.pem",
  "--cluster-key=c-key.pem",
  "--cluster-ca-cert=ca.pem",
];

function parse(argv: string[], env: Record<string, string> = {}) {
  const r = parseServerOptions(argv, env);
  if (r.help) throw new Error("help");
  return r.options;
}

describe("durations as upstream writes them", () => {
  it.each([
    ["200ms", 200],
    ["10s", 10_000],
    ["1h", 3_600_000],
    ["1h30m", 5_400_000],
    ["1.5s", 1500],
    ["0", 0],
    ["500us", 0.5],
  ])("%s is %d ms", (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(["", "10", "1d", "-1s", "1s2", "s", "1..5s"])("%j is refused", (text) => {
    expect(() => parseDuration(text)).toThrow(ConfigError);
  });
});

describe("kgw server options", () => {
  it("defaults to the Kubernetes documentation's ports and upstream's timeouts", () => {
    const o = parse(base);
    expect(o.frontend.port).toBe(8090);
    expect(o.agent.port).toBe(8132);
    expect(o.admin).toEqual({ port: 8133, host: "127.0.0.1" });
    expect(o.health.port).toBe(8134);
    expect(o.agent.keepaliveMs).toBe(3_600_000);
    expect(o.backendDialTimeoutMs).toBe(10_000);
    expect(o.tlsMinVersion).toBe("TLSv1.2");
    expect(o.serverId).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("accepts --flag value and --flag=value, and reads the agent token from the environment", () => {
    const o = parse([...base, "--server-id", "gw-1", "--keepalive-time=30s"], { KGW_AGENT_TOKEN: "tok" });
    expect(o.serverId).toBe("gw-1");
    expect(o.agent.keepaliveMs).toBe(30_000);
    expect(o.agent.tokens).toEqual(["tok"]);
  });

  it("serves only the Unix socket when no frontend certificate is given", () => {
    const o = parse(["--uds-name=/tmp/k.sock", ...base.slice(3)]);
    expect(o.frontend.port).toBeNull();
    expect(o.frontend.udsPath).toBe("/tmp/k.sock");
  });

  it.each([
    [["--bogus"], /unknown flag --bogus/],
    [["--server-port=70000"], /outside 0-65535/],
    [["--server-count=0"], /at least 1/],
    [["--keepalive-time=5"], /invalid duration/],
    [["--proxy-strategies=default,nearest"], /nearest/],
    [["--tls-min-version=VersionTLS10"], /VersionTLS12/],
    [["--mode=udp"], /--mode/],
    [["--server-key="], /together/],
    [["--insecure-frontend"], /contradicts/],
    [["--log-level=loud"], /log-level/],
    [["--server-id"], /needs a value/],
  ])("%j is a one-line configuration error", (extra, message) => {
    expect(() => parse([...base, ...extra])).toThrow(message);
    try {
      parse([...base, ...extra]);
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).not.toContain("\n");
    }
  });

  it("requires client certificates on the TLS frontend unless anonymous callers are asked for", () => {
    const tlsOnly = base.filter((a) => !a.startsWith("--server-ca-cert"));
    expect(() => parse(tlsOnly)).toThrow(
      new ConfigError(
        "--server-cert without --server-ca-cert lets anyone who reaches the frontend open tunnels: give --server-ca-cert (mTLS) or, to accept anonymous callers on purpose, --allow-anonymous-callers",
      ),
    );
    expect(parse(base).frontend).toMatchObject({ anonymousCallers: false, tls: { ca: "ca.pem" } });
    expect(parse([...tlsOnly, "--allow-anonymous-callers"]).frontend).toMatchObject({
      anonymousCallers: true,
      tls: { cert: "s.pem", ca: "" },
    });
  });

  it("counts the plaintext frontend as anonymous: --insecure-frontend is the explicit ask", () => {
    const plaintext = ["--insecure-frontend", ...base.slice(3)];
    expect(parse(plaintext).frontend).toMatchObject({ port: 8090, tls: null, anonymousCallers: true });
    expect(parse([...plaintext, "--allow-anonymous-callers"]).frontend.anonymousCallers).toBe(true);
  });

  it("keeps the Unix socket as it is: file permissions protect it, as upstream", () => {
    expect(parse(["--uds-name=/tmp/k.sock", ...base.slice(3)]).frontend.anonymousCallers).toBe(false);
  });

  it.each([
    [["--allow-anonymous-callers"], /--allow-anonymous-callers contradicts --server-ca-cert/],
    [
      [
        "--uds-name=/tmp/k.sock",
        "--server-cert=",
        "--server-key=",
        "--server-ca-cert=",
        "--allow-anonymous-callers",
      ],
      /--allow-anonymous-callers applies to the TCP frontend/,
    ],
  ])("refuses %j", (extra, message) => {
    expect(() => parse([...base, ...extra])).toThrow(message);
  });

  it("requires a way to authenticate agents and a frontend to serve", () => {
    expect(() => parse(["--cluster-cert=c", "--cluster-key=k", "--uds-name=/tmp/x"])).toThrow(
      /agents must authenticate/,
    );
    expect(() => parse(["--cluster-cert=c", "--cluster-key=k", "--cluster-ca-cert=ca"])).toThrow(
      /frontend needs/,
    );
  });
});

describe("kgw server options in tenant mode", () => {
  const tenantBase = [
    "--tenant-store-dir=/var/lib/kgw/tenants",
    "--tenant-ca-cert=gateway-ca.pem",
    "--cluster-cert=c.pem",
    "--cluster-key=c-key.pem",
  ];

  it("needs no frontend and no agent credentials of its own: the store has them", () => {
    const o = parse(tenantBase);
    expect(o.tenancy).toEqual({
      store: { kind: "dir", dir: "/var/lib/kgw/tenants" },
      caCert: "gateway-ca.pem",
      watchIntervalMs: 2000,
      udsTenant: null,
      defaultQuotas: {
        maxTunnels: 1000,
        dialsPerSecond: 100,
        dialBurst: 200,
        maxAgents: 10_000,
        maxBufferedMiB: 1024,
      },
      install: null,
    });
    // Client certificates of every role are verified against the gateway CA, and optional.
    expect(o.agent.tls.ca).toBe("gateway-ca.pem");
    expect(o.frontend.port).toBeNull();
    expect(o.frontend.anonymousCallers).toBe(false);
  });

  it("reads the store and the CA from the environment kgw tenant uses", () => {
    const o = parse(["--cluster-cert=c.pem", "--cluster-key=c-key.pem"], {
      KGW_TENANT_STORE_DIR: "/srv/tenants",
      KGW_CA_CERT: "ca.pem",
    });
    expect(o.tenancy?.store).toEqual({ kind: "dir", dir: "/srv/tenants" });
    expect(o.tenancy?.caCert).toBe("ca.pem");
  });

  it("verifies a TLS frontend's callers against the gateway CA, with certificates optional (tokens on CONNECT)", () => {
    const o = parse([...tenantBase, "--server-cert=s.pem", "--server-key=s-key.pem"]);
    expect(o.frontend.tls).toEqual({ cert: "s.pem", key: "s-key.pem", ca: "gateway-ca.pem" });
    expect(o.frontend.clientCertRequired).toBe(false);
    expect(o.frontend.anonymousCallers).toBe(false);
  });

  it.each([
    ["--agent-token=t"],
    ["--agent-token-file=tokens"],
    ["--cluster-ca-cert=ca.pem"],
    ["--server-ca-cert=ca.pem", "--server-cert=s.pem", "--server-key=k.pem"],
    ["--allow-anonymous-callers", "--server-cert=s.pem", "--server-key=k.pem"],
    ["--insecure-frontend"],
  ])("refuses the drop-in's own credentials: %s", (...flags) => {
    expect(() => parse([...tenantBase, ...flags])).toThrow(/cannot be used with --tenant-store-dir/);
  });

  it("needs the gateway CA", () => {
    expect(() => parse(["--tenant-store-dir=d", "--cluster-cert=c.pem", "--cluster-key=k.pem"])).toThrow(
      /--tenant-ca-cert/,
    );
  });

  it("gives the Unix socket a configured tenant, since it carries no credential", () => {
    expect(() => parse([...tenantBase, "--uds-name=/run/kgw.sock"])).toThrow(/--uds-tenant/);
    expect(() => parse([...tenantBase, "--uds-tenant=acme"])).toThrow(/--uds-tenant needs --uds-name/);
    expect(() => parse([...tenantBase, "--uds-name=/run/kgw.sock", "--uds-tenant=../x"])).toThrow(
      /not a tenant id/,
    );
    expect(parse([...tenantBase, "--uds-name=/run/kgw.sock", "--uds-tenant=acme"]).tenancy?.udsTenant).toBe(
      "acme",
    );
  });

  it("bounds the watch interval (revocation must stay prompt; polling must stay cheap)", () => {
    expect(parse([...tenantBase, "--tenant-watch-interval=500ms"]).tenancy?.watchIntervalMs).toBe(500);
    expect(() => parse([...tenantBase, "--tenant-watch-interval=10ms"])).toThrow(/--tenant-watch-interval/);
    expect(() => parse([...tenantBase, "--tenant-watch-interval=5m"])).toThrow(/--tenant-watch-interval/);
  });

  it("refuses tenant flags without a tenant store", () => {
    expect(() => parse([...base, "--tenant-ca-cert=ca.pem"])).toThrow(/needs --tenant-store-dir/);
    expect(() => parse([...base, "--uds-name=/s", "--uds-tenant=acme"])).toThrow(/needs --tenant-store-dir/);
  });

  it("leaves the drop-in as it was", () => {
    const o = parse(base);
    expect(o.tenancy).toBeNull();
    expect(o.frontend.clientCertRequired).toBe(true);
    expect(o.agent.tls.ca).toBe("ca.pem");
  });
});
