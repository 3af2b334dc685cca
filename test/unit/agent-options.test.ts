import { describe, expect, it } from "vitest";
import { agentHelp, parseAgentOptions } from "../../lib/config/agent-options.js";
import { ConfigError } from "../../lib/errors.js";

const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseAgentOptions(argv, env);
  if (r.help) throw new Error("unexpected help");
  return r.options;
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe("parseAgentOptions", () => {
  it("has upstream's defaults", () => {
    const o = parse([]);
    expect(o.agentId).toMatch(UUID);
    expect(o).toMatchObject({
      agentIdentifiers: "",
      server: { host: "127.0.0.1", port: 8132, serverName: "127.0.0.1", keepaliveMs: 3_600_000 },
      tls: { caCert: "", agentCert: "", agentKey: "" },
      auth: { tokenPath: "", token: "" },
      sync: { intervalMs: 1_000, intervalCapMs: 10_000, probeIntervalMs: 1_000 },
      dialTimeoutMs: 10_000,
      destinations: { allowLinkLocal: false },
      drainTimeoutMs: 25_000,
      health: { host: "", port: 8093 },
      admin: { host: "127.0.0.1", port: 8094 },
      logLevel: "info",
    });
  });

  it("generates a different agent ID per run unless one is given", () => {
    expect(parse([]).agentId).not.toBe(parse([]).agentId);
    expect(parse(["--agent-id=node-a"]).agentId).toBe("node-a");
  });

  it("reads PROXY_AGENT_ID, KGW_AGENT_TOKEN and KGW_LOG_LEVEL; flags win over the environment", () => {
    const env = { PROXY_AGENT_ID: "from-env", KGW_AGENT_TOKEN: "s3cret", KGW_LOG_LEVEL: "debug" };
    expect(parse([], env)).toMatchObject({
      agentId: "from-env",
      auth: { token: "s3cret" },
      logLevel: "debug",
    });
    expect(parse(["--agent-id", "from-flag"], env).agentId).toBe("from-flag");
  });

  it("parses Go durations, ports, hosts and the server name", () => {
    const o = parse([
      "--proxy-server-host=konnectivity.example.com",
      "--proxy-server-port",
      "443",
      "--server-name=gw.internal",
      "--sync-interval=200ms",
      "--sync-interval-cap=1m30s",
      "--probe-interval=1.5s",
      "--keepalive-time=0",
      "--dial-timeout=3s",
      "--drain-timeout=0",
      "--health-server-port=0",
      "--admin-server-port=0",
      "--sync-forever=false",
      "--server-transport=grpc",
    ]);
    expect(o.server).toEqual({
      host: "konnectivity.example.com",
      port: 443,
      serverName: "gw.internal",
      keepaliveMs: 0,
      transport: "grpc",
    });
    expect(o.sync).toEqual({ intervalMs: 200, intervalCapMs: 90_000, probeIntervalMs: 1_500 });
    expect(o).toMatchObject({
      dialTimeoutMs: 3_000,
      drainTimeoutMs: 0,
      health: { port: 0 },
      admin: { port: 0 },
    });
  });

  it("refuses link-local destinations unless --allow-link-local-destinations says otherwise", () => {
    expect(parse([]).destinations).toEqual({ allowLinkLocal: false });
    expect(parse(["--allow-link-local-destinations"]).destinations).toEqual({ allowLinkLocal: true });
    expect(parse(["--allow-link-local-destinations=false"]).destinations).toEqual({ allowLinkLocal: false });
  });

  it("accepts upstream's agent identifiers", () => {
    const ids =
      "host=localhost&host=node1.mydomain.com&cidr=127.0.0.1/16&ipv4=1.2.3.4&ipv6=%3A%3A1&default-route=true";
    expect(parse([`--agent-identifiers=${ids}`]).agentIdentifiers).toBe(ids);
  });

  it.each([
    [["--agent-cert=a.pem"], "--agent-cert and --agent-key must be given together"],
    [["--agent-key=a.pem"], "--agent-cert and --agent-key must be given together"],
    [["--proxy-server-port=0"], "--proxy-server-port must be between 1 and 65535"],
    [["--proxy-server-port=70000"], "--proxy-server-port: port 70000 is outside 0-65535"],
    [["--proxy-server-host="], "--proxy-server-host must not be empty"],
    [["--sync-interval=20s"], "--sync-interval must not exceed --sync-interval-cap"],
    [["--sync-interval=0"], "--sync-interval must be positive"],
    [["--probe-interval=0"], "--probe-interval must be positive"],
    [["--keepalive-time=5s"], "--keepalive-time must be 0 (off) or at least 10s"],
    [["--dial-timeout=0"], "--dial-timeout must be positive: a dial may not hang"],
    [
      ["--sync-interval=soon"],
      '--sync-interval: invalid duration "soon" at "soon" (use e.g. 200ms, 10s, 1h)',
    ],
    [
      ["--agent-identifiers=zone=a"],
      '--agent-identifiers: unknown identifier "zone" (use host, ipv4, ipv6, cidr, default-route)',
    ],
    [["--agent-identifiers=host=a;host=b"], "--agent-identifiers: use & between pairs, not ;"],
    [["--agent-identifiers=host=%zz"], '--agent-identifiers: invalid %-escape at "%zz"'],
    [["--log-level=loud"], '--log-level: "loud" is not one of trace, debug, info, warn, error'],
    [["--alpn-proto=h2"], "unknown flag --alpn-proto (see --help)"],
    [["--agent-token=a b"], "--agent-token must not contain whitespace"],
    [["--server-transport=quic"], "--server-transport must be one of auto, grpc"],
  ])("refuses %j", (argv, message) => {
    expect(() => parse(argv)).toThrow(new ConfigError(message));
  });

  it("refuses a token file together with an inline token, even from the environment", () => {
    expect(() => parse(["--service-account-token-path=/var/run/token"], { KGW_AGENT_TOKEN: "t" })).toThrow(
      ConfigError,
    );
  });

  it("answers --help with the flag table", () => {
    expect(parseAgentOptions(["--help"], {})).toEqual({ help: true });
    const help = agentHelp();
    expect(help).toContain("Usage: kgw agent [flags]");
    expect(help).toMatch(/--proxy-server-port port\s+.*\(default 8132\)/);
    expect(help).toMatch(/--sync-interval-cap duration\s+.*\(default 10s\)/);
    expect(help).toContain("[$PROXY_AGENT_ID]");
    expect(help).toContain("[$KGW_AGENT_TOKEN]");
  });
});
