import { describe, expect, it } from "vitest";
import { sourceKey } from "../../lib/transport/handshake-gate.js";

describe("sourceKey: what a per-source handshake limit counts", () => {
  it("counts IPv4 sources by address, IPv4-mapped IPv6 as the IPv4 address", () => {
    expect(sourceKey("192.0.2.7")).toBe("192.0.2.7");
    expect(sourceKey("::ffff:192.0.2.7")).toBe("192.0.2.7");
  });

  it("counts IPv6 sources by their /64, however the address is written", () => {
    const key = "2001:db8:aa:bb::/64";
    expect(sourceKey("2001:db8:aa:bb::1")).toBe(key);
    expect(sourceKey("2001:0db8:00aa:00bb:ffff:1:2:3")).toBe(key);
    expect(sourceKey("2001:DB8:AA:BB:0:0:0:9")).toBe(key);
    expect(sourceKey("2001:db8:aa:bc::1")).not.toBe(key);
  });

  it("handles compressed forms, zones and embedded IPv4 tails", () => {
    expect(sourceKey("::1")).toBe("0:0:0:0::/64");
    expect(sourceKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(sourceKey("2001:db8::")).toBe("2001:db8:0:0::/64");
    expect(sourceKey("64:ff9b::192.0.2.1")).toBe("64:ff9b:0:0::/64");
    expect(sourceKey("1:2:3:4:5:6:192.0.2.1")).toBe("1:2:3:4::/64");
  });
});
