import type { NetworkInterfaceInfo } from "node:os";
import { describe, expect, it } from "vitest";
import { parseFleet } from "../../lib/config/fleet-options.js";
import { parseServerOptions } from "../../lib/config/server-options.js";

/** A fleet member's flags: tenant mode on the table, the peer port with its TLS files. */
const fleetArgs = [
  "--registry-table=kgw-prod",
  "--tenant-ca-cert=gateway-ca.pem",
  "--cluster-cert=c.pem",
  "--cluster-key=c-key.pem",
  "--peer-port=8135",
  "--peer-cert=peer.pem",
  "--peer-key=peer-key.pem",
  "--peer-ca-cert=peer-ca.pem",
  "--peer-advertise-address=10.0.3.17:8135",
];

function parse(argv: string[]) {
  const r = parseServerOptions(argv, {});
  if (r.help) throw new Error("help");
  return r.options;
}

const nic = (address: string, internal = false): NetworkInterfaceInfo =>
  ({
    address,
    family: "IPv4",
    internal,
    netmask: "255.255.255.0",
    mac: "",
    cidr: null,
  }) as NetworkInterfaceInfo;

const flags = (over: Partial<Parameters<typeof parseFleet>[0]> = {}) => ({
  "registry-table": "kgw-prod",
  "peer-advertise-address": "",
  "lease-heartbeat": 3_000,
  "lease-duration": 10_000,
  "agent-redundancy": 2,
  ...over,
});

describe("fleet options", () => {
  it("make a fleet member whose tenants are in the same table", () => {
    const o = parse(fleetArgs);
    expect(o.fleet).toEqual({
      table: "kgw-prod",
      peerAddress: "10.0.3.17:8135",
      heartbeatMs: 3_000,
      leaseMs: 10_000,
      agentRedundancy: 2,
    });
    expect(o.tenancy?.store).toEqual({ kind: "dynamodb", table: "kgw-prod" });
    expect(o.peer?.port).toBe(8135);
  });

  it("are off without --registry-table, and the instance is alone", () => {
    expect(
      parse([
        "--server-cert=s.pem",
        "--server-key=k.pem",
        "--server-ca-cert=ca.pem",
        "--cluster-cert=c.pem",
        "--cluster-key=k.pem",
        "--cluster-ca-cert=ca.pem",
        "--agent-token=abcdefghijklmnop0123",
      ]).fleet,
    ).toBeNull();
  });

  it.each([
    [
      ["--peer-port=0", "--peer-cert=", "--peer-key=", "--peer-ca-cert="],
      "--registry-table needs --peer-port",
    ],
    [["--tenant-store-dir=/srv/tenants"], "--tenant-store-dir cannot be used with --registry-table"],
    [["--registry-table=a b"], "is not a DynamoDB table name"],
    [
      ["--lease-heartbeat=5s", "--lease-duration=10s"],
      "--lease-duration must be at least 3 times --lease-heartbeat",
    ],
    [["--lease-heartbeat=0s"], "--lease-heartbeat must be positive"],
    [["--agent-redundancy=0"], "--agent-redundancy must be at least 1"],
    [["--peer-advertise-address=10.0.3.17"], "is not host:port"],
    [["--peer-advertise-address=[zz]:8135"], "is not host:port"],
  ])("refuse %j: %s", (extra, message) => {
    const argv = [
      ...fleetArgs.filter((a) => !extra.some((e) => e.split("=")[0] === a.split("=")[0])),
      ...extra,
    ];
    expect(() => parse(argv)).toThrow(message);
  });

  it("refuse --peer-advertise-address without a fleet", () => {
    expect(() =>
      parseFleet(flags({ "registry-table": "", "peer-advertise-address": "10.0.0.1:8135" }), 8135),
    ).toThrow("--peer-advertise-address needs --registry-table");
  });

  it("advertise the task's own address: not loopback, not link-local", () => {
    const interfaces = () => ({
      lo: [nic("127.0.0.1", true)],
      "ecs-eth0": [nic("169.254.172.2")],
      eth0: [nic("10.0.3.17")],
    });
    expect(parseFleet(flags(), 8135, interfaces)?.peerAddress).toBe("10.0.3.17:8135");
    expect(
      parseFleet(flags({ "peer-advertise-address": "[fd00::5]:9000" }), 8135, interfaces)?.peerAddress,
    ).toBe("[fd00::5]:9000");
    expect(() => parseFleet(flags(), 8135, () => ({ lo: [nic("127.0.0.1", true)] }))).toThrow(
      "--peer-advertise-address is needed",
    );
  });
});
