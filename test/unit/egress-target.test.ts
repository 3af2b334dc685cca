/**
 * The one reading of a dial target (lib/egress/target.ts) that CONNECT, gRPC and a peer hop
 * share: which host a text names, as the resolver of an agent (ours or upstream's) would read it.
 */
import { describe, expect, it } from "vitest";
import { parseTargetAddress, parseTargetHost } from "../../lib/egress/target.js";

describe("a dial target's host", () => {
  it.each([
    ["10.0.0.5", { kind: "ipv4", address: "10.0.0.5" }],
    ["0.0.0.0", { kind: "ipv4", address: "0.0.0.0" }],
    ["255.255.255.255", { kind: "ipv4", address: "255.255.255.255" }],
    ["fd00::1:5", { kind: "ipv6", address: "fd00::1:5" }],
    ["FD00:0:0:0:0:0:0:1", { kind: "ipv6", address: "fd00::1" }],
    ["::1", { kind: "ipv6", address: "::1" }],
    ["::", { kind: "ipv6", address: "::" }],
    // IPv4-mapped: the kernel connects to the IPv4 address, so it is judged as that.
    ["::ffff:127.0.0.1", { kind: "ipv4", address: "127.0.0.1" }],
    ["0:0:0:0:0:ffff:a9fe:a9fe", { kind: "ipv4", address: "169.254.169.254" }],
    ["Kubernetes.Default.svc", { kind: "name", name: "kubernetes.default.svc" }],
    ["localhost.", { kind: "name", name: "localhost" }],
    ["ip-10-0-0-5.ec2.internal.", { kind: "name", name: "ip-10-0-0-5.ec2.internal" }],
    ["0x7f000001.example", { kind: "name", name: "0x7f000001.example" }],
  ])("reads %j as %j", (host, expected) => {
    expect(parseTargetHost(host)).toEqual({ ok: true, value: expected });
  });

  // Every spelling inet_aton(3) takes is recognised, and only the dotted quad accepted: the
  // reason names the address the text spells.
  it.each([
    ["127.1", "127.0.0.1"],
    ["127.0.1", "127.0.0.1"],
    ["2130706433", "127.0.0.1"],
    ["0x7f000001", "127.0.0.1"],
    ["0X7F000001", "127.0.0.1"],
    ["0x7f.1", "127.0.0.1"],
    ["0177.0.0.1", "127.0.0.1"],
    ["0251.0376.0251.0376", "169.254.169.254"],
    ["169.254.169.254.", "169.254.169.254"],
    ["127.0.0.1.", "127.0.0.1"],
    ["010.0.0.1", "8.0.0.1"],
    ["0", "0.0.0.0"],
    ["00000000000000000000177.0.0.1", "127.0.0.1"],
  ])("refuses %j, another spelling of %s", (host, address) => {
    const r = parseTargetHost(host);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain(`IPv4 address ${address}`);
  });

  it.each([
    ["", "empty host"],
    ["256.0.0.1", "invalid IPv4 address"],
    ["1.2.3.4.5", "invalid IPv4 address"],
    ["127.0.0.08", "invalid IPv4 address"],
    ["0x", "invalid IPv4 address"],
    ["4294967296", "invalid IPv4 address"],
    ["1.16777216", "invalid IPv4 address"],
    ["example.127", "invalid IPv4 address"],
    ["example.0x1", "invalid IPv4 address"],
    ["a..b", "invalid host name"],
    ["my_host", "invalid host name"],
    ["-host", "invalid host name"],
    ["example.com..", "invalid host name"],
    [`${"a".repeat(64)}.com`, "invalid host name"],
    [Array(64).fill("abc").join("."), "longer than 253"],
    ["fe80::1%eth0", "zone id"],
    ["::127.0.0.1", "IPv4-compatible"],
    ["::7f00:1", "IPv4-compatible"],
    ["fd00::1::2", "invalid IPv6 address"],
    ["[::1]", "invalid IPv6 address"],
  ])("refuses %j: %s", (host, why) => {
    const r = parseTargetHost(host);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain(why);
  });
});

describe("a dial target's host:port", () => {
  it.each([
    ["10.0.0.5:10250", "ipv4", 10250],
    ["[fd00::1]:443", "ipv6", 443],
    ["[::ffff:10.0.0.5]:443", "ipv4", 443],
    ["svc.ns.svc.cluster.local.:443", "name", 443],
  ])("reads %j", (address, kind, port) => {
    const r = parseTargetAddress(address);
    expect(r.ok && r.value.host.kind).toBe(kind);
    expect(r.ok && r.value.port).toBe(port);
  });

  it.each([
    ["10.0.0.5", "expected host:port"],
    ["::1:80", "IPv6 address takes brackets"],
    ["[::1]", "expected [ipv6]:port"],
    ["[10.0.0.5]:80", "invalid IPv6 address"],
    ["10.0.0.5:0", "port must be"],
    ["10.0.0.5:65536", "port must be"],
    ["10.0.0.5:+80", "port must be"],
    [":80", "empty host"],
    ["127.1:80", "IPv4 address 127.0.0.1"],
  ])("refuses %j: %s", (address, why) => {
    const r = parseTargetAddress(address);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain(why);
  });
});
