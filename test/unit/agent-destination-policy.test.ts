import { describe, expect, it } from "vitest";
import { dropInDestinationPolicy, linkLocalKind } from "../../lib/agent/destination-policy.js";

// Pure functions on address strings: nothing here opens a socket or sends a packet.
const deny = dropInDestinationPolicy({ allowLinkLocal: false });
const allow = dropInDestinationPolicy({ allowLinkLocal: true });
const at = (address: string, host = address) => ({ host, port: 80, address });

describe("the drop-in destination policy", () => {
  it.each([
    "169.254.169.254", // EC2, GCE, Azure, OCI instance metadata
    "169.254.170.2", // ECS task credentials
    "169.254.0.0",
    "169.254.255.255",
    "::ffff:169.254.169.254", // IPv4-mapped IPv6: the kernel connects to the IPv4 address
    "::ffff:a9fe:a9fe",
    "0:0:0:0:0:ffff:a9fe:a9fe",
    "fe80::1",
    "fe80::1%eth0",
    "FE80::A:B",
    "febf:ffff::1",
    "fd00:ec2::254", // AWS instance metadata over IPv6
    "fd00:ec2:0:0:0:0:0:254",
    "fd20:ce::254", // Google Cloud metadata over IPv6
  ])("refuses %s", (address) => {
    expect(deny(at(address))).toMatchObject({ allowed: false, rule: "link_local" });
    expect(linkLocalKind(address)).not.toBeNull();
  });

  it.each([
    "127.0.0.1", // loopback stays allowed in the drop-in mode
    "::1",
    "::ffff:127.0.0.1",
    "10.0.0.5",
    "169.253.255.255",
    "169.255.0.0",
    "fec0::1",
    "fd00:ec2::253",
    "2600:1f18::1",
  ])("allows %s", (address) => {
    expect(deny(at(address))).toEqual({ allowed: true });
    expect(linkLocalKind(address)).toBeNull();
  });

  it("says why, naming the host when a name resolved to the address (DNS rebinding)", () => {
    expect(deny(at("169.254.169.254"))).toEqual({
      allowed: false,
      rule: "link_local",
      reason:
        "169.254.169.254 is link-local (cloud instance metadata and credentials live there); the agent refuses it unless started with --allow-link-local-destinations",
    });
    expect(deny(at("169.254.169.254", "metadata.google.internal"))).toMatchObject({
      reason: expect.stringMatching(
        /^metadata\.google\.internal resolves to 169\.254\.169\.254, which is link-local/,
      ),
    });
    expect(deny(at("fd00:ec2::254"))).toMatchObject({
      reason: expect.stringMatching(/^fd00:ec2::254 is the AWS instance metadata service;/),
    });
  });

  it("allows everything with --allow-link-local-destinations", () => {
    for (const address of ["169.254.169.254", "fe80::1", "fd00:ec2::254", "::ffff:169.254.169.254"]) {
      expect(allow(at(address))).toEqual({ allowed: true });
    }
  });
});
