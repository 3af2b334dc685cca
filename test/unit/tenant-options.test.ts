/** `kgw tenant` options: subcommands, arguments, which flags apply where, defaults, validation. */
import { describe, expect, it } from "vitest";
import {
  parseTenantCommand,
  TENANT_FLAGS,
  tenantHelp,
} from "../../lib/commands/tenant/parse-tenant-command.js";
import { parseGatewayAddress } from "../../lib/tenancy/bundle/gateway-address.js";

const BUNDLE_ENV = {
  KGW_TENANT_STORE_DIR: "/var/lib/kgw/tenants",
  KGW_CA_CERT: "/etc/kgw/ca.pem",
  KGW_CA_KEY: "/etc/kgw/ca-key.pem",
  KGW_GATEWAY_ADDRESS: "gw.example.com:8132",
};

const command = (argv: string[], env: Record<string, string> = BUNDLE_ENV) => {
  const parsed = parseTenantCommand(argv, env);
  if (parsed.help) throw new Error("unexpected help");
  return parsed.command;
};
const refusal = (argv: string[], env: Record<string, string> = BUNDLE_ENV) => {
  try {
    parseTenantCommand(argv, env);
  } catch (err) {
    expect(err).toMatchObject({ code: "ERR_CONFIG" });
    return (err as Error).message;
  }
  throw new Error(`accepted: ${argv.join(" ")}`);
};

describe("kgw tenant options", () => {
  it("parses create with the bundle from flags and environment, defaults filled in", () => {
    expect(command(["create", "acme", "--display-name", "Acme prod", "--caller-token"])).toEqual({
      name: "create",
      storeDir: "/var/lib/kgw/tenants",
      output: "text",
      tenantId: "acme",
      displayName: "Acme prod",
      callerToken: true,
      egress: null,
      bundle: {
        caCert: "/etc/kgw/ca.pem",
        caKey: "/etc/kgw/ca-key.pem",
        caSecret: null,
        serverCaBundle: "/etc/kgw/ca.pem",
        gateway: { host: "gw.example.com", port: 8132, url: "https://gw.example.com:8132" },
        outDir: "kgw-bundle-acme",
        mountDir: "/etc/kubernetes/kgw",
        udsName: "/etc/kubernetes/konnectivity-server/konnectivity-server.socket",
        udsProxyProtocol: "GRPC",
        certValidityMs: 365 * 86_400_000,
      },
    });
  });

  it("lets create skip the bundle, and then needs no CA", () => {
    const c = command(["create", "acme", "--bundle=false"], { KGW_TENANT_STORE_DIR: "/s" });
    expect(c).toMatchObject({ name: "create", bundle: null, displayName: undefined });
  });

  it("parses every other subcommand", () => {
    expect(command(["list", "--all", "--output=json"])).toMatchObject({
      name: "list",
      all: true,
      output: "json",
    });
    expect(command(["show", "acme"])).toMatchObject({ name: "show", tenantId: "acme" });
    expect(command(["delete", "acme"])).toMatchObject({ name: "delete", tenantId: "acme" });
    expect(command(["revoke", "acme", "4A:F3"])).toMatchObject({ credentialId: "4a:f3" });
    expect(command(["rotate", "acme"])).toMatchObject({
      credential: "agent-token",
      graceMs: 24 * 3_600_000,
      bundle: null,
    });
    expect(
      command(["rotate", "acme", "--credential=caller-certificate", "--grace=1h", "--out=/tmp/b"]),
    ).toMatchObject({
      credential: "caller-certificate",
      graceMs: 3_600_000,
      bundle: { outDir: "/tmp/b" },
    });
    expect(
      command([
        "bundle",
        "acme",
        "--mount-dir=/srv/kgw/",
        "--uds-proxy-protocol=HTTPConnect",
        "--cert-validity=720h",
      ]),
    ).toMatchObject({
      bundle: { mountDir: "/srv/kgw", udsProxyProtocol: "HTTPConnect", certValidityMs: 720 * 3_600_000 },
    });
  });

  it("parses rotate --credential=agent-certificate into an agent bundle with its own defaults", () => {
    expect(command(["rotate", "acme", "--credential=agent-certificate"])).toEqual({
      name: "rotate",
      storeDir: "/var/lib/kgw/tenants",
      output: "text",
      tenantId: "acme",
      credential: "agent-certificate",
      graceMs: 24 * 3_600_000,
      bundle: null,
      agentBundle: {
        caCert: "/etc/kgw/ca.pem",
        caKey: "/etc/kgw/ca-key.pem",
        caSecret: null,
        serverCaBundle: "/etc/kgw/ca.pem",
        outDir: "kgw-agent-bundle-acme",
        mountDir: "/etc/kgw-agent",
        certValidityMs: 365 * 86_400_000,
      },
    });
    // The gateway address is for kube-apiserver's configuration: an agent bundle does not need it.
    const { KGW_GATEWAY_ADDRESS: _unused, ...noGateway } = BUNDLE_ENV;
    expect(
      command(
        [
          "rotate",
          "acme",
          "--credential=agent-certificate",
          "--out=/tmp/a",
          "--mount-dir=/var/run/kgw/",
          "--server-ca-bundle=/etc/kgw/public-ca.pem",
          "--cert-validity=720h",
        ],
        noGateway,
      ),
    ).toMatchObject({
      bundle: null,
      agentBundle: {
        outDir: "/tmp/a",
        mountDir: "/var/run/kgw",
        serverCaBundle: "/etc/kgw/public-ca.pem",
        certValidityMs: 720 * 3_600_000,
      },
    });
    expect(
      refusal(["rotate", "acme", "--credential=agent-certificate"], { KGW_TENANT_STORE_DIR: "/s" }),
    ).toContain("an agent bundle needs the gateway CA: --ca-cert and --ca-key");
    expect(command(["rotate", "acme", "--credential=caller-certificate"])).toMatchObject({
      agentBundle: null,
    });
  });

  it("answers help for no subcommand, for help, and for --help after a subcommand", () => {
    expect(parseTenantCommand([], {})).toMatchObject({ help: true });
    expect(parseTenantCommand(["help"], {})).toMatchObject({ help: true });
    const sub = parseTenantCommand(["rotate", "--help"], {});
    expect(sub.help && sub.text).toContain("--grace");
    expect(sub.help && sub.text).not.toContain("--all");
    for (const flag of Object.keys(TENANT_FLAGS)) expect(tenantHelp()).toContain(`--${flag}`);
  });

  it.each([
    [["frobnicate"], "unknown subcommand"],
    [["show"], "usage: kgw tenant show TENANT"],
    [["show", "a", "b"], "usage"],
    [["revoke", "acme"], "usage: kgw tenant revoke TENANT CREDENTIAL_ID"],
    [["show", "../etc"], "invalid tenant id"],
    [["show", "default"], "reserved"],
    [["create", "x".repeat(64)], "invalid tenant id"],
    [["list", "--grace=1h"], "--grace does not apply to kgw tenant list"],
    [["show", "acme", "--ca-cert=/x"], "--ca-cert does not apply"],
    [
      ["rotate", "acme", "--out=/x"],
      "--out applies to --credential=caller-certificate or agent-certificate only",
    ],
    [["rotate", "acme", "--credential=caller-token", "--cert-validity=48h"], "--cert-validity applies to"],
    [
      ["rotate", "acme", "--credential=agent-certificate", "--uds-name=/s"],
      "--uds-name applies to the caller bundle only",
    ],
    [
      ["rotate", "acme", "--credential=agent-certificate", "--gateway-address=gw:1"],
      "--gateway-address applies",
    ],
    [["rotate", "acme", "--credential=agent-certificate", "--mount-dir=pod/dir"], "--mount-dir"],
    [["rotate", "acme", "--credential=agent-certificate", "--cert-validity=1h"], "--cert-validity"],
    [["rotate", "acme", "--credential=password"], "--credential"],
    [["rotate", "acme", "--grace=2400h"], "at most 90 days"],
    [["list", "--output=yaml"], "--output"],
    [["revoke", "acme", "not-hex"], "CREDENTIAL_ID"],
    [["bundle", "acme", "--uds-proxy-protocol=Direct"], "--uds-proxy-protocol"],
    [["bundle", "acme", "--cert-validity=1h"], "--cert-validity"],
    [["bundle", "acme", "--mount-dir=relative/dir"], "--mount-dir"],
    [["bundle", "acme", "--mount-dir=/etc/../root"], "--mount-dir"],
    [["bundle", "acme", "--mount-dir=/with space"], "--mount-dir"],
    [["bundle", "acme", "--mount-dir=/etc/kgw\u0000"], "--mount-dir"],
    [["bundle", "acme", "--uds-name=/é"], "--uds-name"],
    [["bundle", "acme", "--out=\u001b[2J"], "--out"],
    [["bundle", "acme", "--gateway-address=gw"], "--gateway-address"],
    [["show", "acme", "--store-dir="], "--store-dir is required"],
  ])("refuses %j", (argv, message) => {
    expect(refusal(argv)).toContain(message);
  });

  it("needs a store, and a CA and gateway address for a bundle", () => {
    expect(refusal(["list"], {})).toContain("--store-dir is required");
    expect(refusal(["create", "acme"], { KGW_TENANT_STORE_DIR: "/s" })).toContain("--ca-cert and --ca-key");
    expect(refusal(["bundle", "acme"], { ...BUNDLE_ENV, KGW_GATEWAY_ADDRESS: "" })).toContain(
      "--gateway-address",
    );
  });

  it("ignores environment variables for flags the subcommand does not take", () => {
    expect(command(["list"], BUNDLE_ENV)).toMatchObject({ name: "list" });
  });
});

describe("gateway addresses", () => {
  it.each([
    ["gw.example.com:8132", "https://gw.example.com:8132"],
    ["gw:1", "https://gw:1"],
    ["10.0.0.1:443", "https://10.0.0.1:443"],
    ["[2001:db8::1]:8132", "https://[2001:db8::1]:8132"],
    ["GW.Example.COM.:65535", "https://GW.Example.COM.:65535"],
  ])("accepts %s", (text, url) => {
    expect(parseGatewayAddress(text)).toMatchObject({ url });
  });

  it.each([
    "gw",
    ":8132",
    "gw:0",
    "gw:65536",
    "gw:123456",
    "gw:http",
    "2001:db8::1:8132",
    "[zz]:1",
    "[10.0.0.1]:1",
    "a b:1",
    "gw.example.com:8132/path",
    "user@gw:1",
    "https://gw:1",
    "-gw:1",
    "gw_1:1",
    `${"a".repeat(64)}.com:1`,
    "bücher.example:1",
  ])("refuses %j", (text) => {
    expect(parseGatewayAddress(text)).toHaveProperty("error");
  });
});

describe("kgw tenant policy and quota", () => {
  const parse = (argv: string[]) => parseTenantCommand(argv, { KGW_TENANT_STORE_DIR: "/s" });
  const cmd = (argv: string[]) => {
    const p = parse(argv);
    if (p.help) throw new Error("help");
    return p.command;
  };

  it("policy: shows without flags, replaces with --set (canonical), resets with --default", () => {
    expect(cmd(["policy", "acme"])).toMatchObject({ name: "policy", tenantId: "acme", change: null });
    expect(
      cmd(["policy", "acme", "--set", "10.1.2.3", "*.SVC.cluster.local:443", "--allow-loopback"]),
    ).toMatchObject({
      change: {
        allow: ["10.1.2.3/32", "*.svc.cluster.local:443"],
        allowLoopback: true,
        allowLinkLocal: false,
      },
    });
    // An empty policy refuses every dial: only when the operator says so.
    expect(cmd(["policy", "acme", "--set", "--deny-all"])).toMatchObject({ change: { allow: [] } });
    expect(cmd(["policy", "acme", "--default"])).toMatchObject({ change: "default" });
  });

  it.each([
    [["policy", "acme", "10.0.0.0/8"], "rules are given with --set"],
    [["policy", "acme", "--allow-loopback"], "--allow-loopback applies with --set"],
    [["policy", "acme", "--default", "--set"], "--default takes no rules"],
    [
      ["policy", "acme", "--set"],
      "--set with no RULE would refuse every dial of the tenant; give --deny-all",
    ],
    [["policy", "acme", "--set", "10.0.0.0/8", "--deny-all"], "--deny-all takes no RULE"],
    [["policy", "acme", "--deny-all"], "--deny-all applies with --set"],
    [["policy", "acme", "--default", "--deny-all"], "--default takes no rules"],
    [["policy", "acme", "--set", "10.0.0.0/99"], "prefix length"],
    [["policy", "Bad_Id"], "tenant id"],
    [["quota", "acme", "--max-tunnels=-1"], "maxTunnels must be an integer from 1"],
    [["quota", "acme", "--dial-rate=100001"], "dialsPerSecond must be an integer from 1 to 100000"],
    [["quota", "acme", "--set"], "--set does not apply to kgw tenant quota"],
  ])("refuses %j", (argv, why) => {
    expect(() => parse(argv)).toThrow(expect.objectContaining({ code: "ERR_CONFIG" }));
    expect(() => parse(argv)).toThrow(why);
  });

  it("quota: the flags given, 0 meaning the server's default", () => {
    expect(cmd(["quota", "acme"])).toMatchObject({ name: "quota", changes: {} });
    expect(cmd(["quota", "acme", "--max-tunnels=50", "--dial-rate=0"])).toMatchObject({
      changes: { maxTunnels: 50, dialsPerSecond: null },
    });
  });

  it("create: --allow-loopback gives the default rules with loopback allowed, in the same write", () => {
    expect(cmd(["create", "acme", "--bundle=false", "--allow-loopback"])).toMatchObject({
      egress: { allow: ["0.0.0.0/0", "::/0", "*"], allowLoopback: true, allowLinkLocal: false },
    });
  });
});

describe("kgw tenant --ca-secret", () => {
  const parse = (argv: string[], env: Record<string, string> = {}) => {
    const parsed = parseTenantCommand(argv, { KGW_GATEWAY_ADDRESS: "gw.example.com:8132", ...env });
    if (parsed.help) throw new Error("help");
    return parsed.command;
  };

  it("takes the gateway CA from a secret instead of files, for create, bundle and rotate", () => {
    const arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:KgwGatewayCa-AbC123";
    const create = parse(["create", "acme", "--table=kgw-registry", `--ca-secret=${arn}`]);
    expect(create).toMatchObject({
      table: "kgw-registry",
      bundle: { caSecret: arn, caCert: "", caKey: "", serverCaBundle: "" },
    });
    expect(
      parse(["bundle", "acme", "--table=t01", "--ca-secret=kgw/ca", "--server-ca-bundle=/etc/ca.pem"]),
    ).toMatchObject({
      bundle: { caSecret: "kgw/ca", serverCaBundle: "/etc/ca.pem" },
    });
    expect(
      parse(["rotate", "acme", "--table=t01", "--credential=agent-certificate"], { KGW_CA_SECRET: "kgw/ca" }),
    ).toMatchObject({ agentBundle: { caSecret: "kgw/ca" } });
  });

  it("prefers the secret over CA files left in the environment, and refuses both on the command line", () => {
    expect(
      parse(["create", "acme", "--table=t01", "--ca-secret=kgw/ca"], {
        KGW_CA_CERT: "/x.pem",
        KGW_CA_KEY: "/y.pem",
      }),
    ).toMatchObject({ bundle: { caSecret: "kgw/ca", caCert: "" } });
    expect(() => parse(["create", "acme", "--table=t01", "--ca-secret=kgw/ca", "--ca-cert=/x.pem"])).toThrow(
      /name two CAs/,
    );
    // CA files on the command line win over the secret exported for other commands.
    const files = ["--ca-cert=/x.pem", "--ca-key=/y.pem"];
    expect(parse(["bundle", "acme", "--table=t01", ...files], { KGW_CA_SECRET: "kgw/ca" })).toMatchObject({
      bundle: { caSecret: null, caCert: "/x.pem", caKey: "/y.pem" },
    });
    expect(
      parse(["manifest", "acme", "--table=t01", "--ca-cert=/x.pem"], { KGW_CA_SECRET: "kgw/ca" }),
    ).toMatchObject({ manifest: { caBundleFlag: "--ca-cert", caBundle: "/x.pem" } });
    expect(parse(["manifest", "acme", "--table=t01"], { KGW_CA_SECRET: "kgw/ca" })).toMatchObject({
      manifest: { caBundleFlag: "--ca-secret", caBundle: "kgw/ca" },
    });
    expect(() => parse(["create", "acme", "--table=t01", "--ca-secret=not a name"])).toThrow(
      /not a secret name or ARN/,
    );
    expect(() => parse(["list", "--table=t01", "--ca-secret=kgw/ca"])).toThrow(
      /does not apply to kgw tenant list/,
    );
  });
});
