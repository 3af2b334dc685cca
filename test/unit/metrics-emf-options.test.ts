import { describe, expect, it } from "vitest";
import { parseServerOptions } from "../../lib/config/server-options.js";
import { ConfigError } from "../../lib/errors.js";

const dropIn = [
  "--cluster-cert=c.pem",
  "--cluster-key=c-key.pem",
  "--agent-token=t",
  "--uds-name=/tmp/kgw.sock",
];
const fleet = [
  "--registry-table=Kgw-Stateful-RegistryTable-ABC",
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

describe("--metrics-emf-interval and --metrics-emf-namespace", () => {
  it("are off unless asked for", () => {
    expect(parse(dropIn).metricsEmf).toBeNull();
  });

  it("name the fleet by its registry table, or standalone without one", () => {
    expect(parse([...fleet, "--metrics-emf-interval=60s"]).metricsEmf).toEqual({
      intervalMs: 60_000,
      namespace: "kgw",
      fleet: "Kgw-Stateful-RegistryTable-ABC",
    });
    expect(
      parse([...dropIn, "--metrics-emf-interval=1m", "--metrics-emf-namespace=acme/kgw"]).metricsEmf,
    ).toEqual({
      intervalMs: 60_000,
      namespace: "acme/kgw",
      fleet: "standalone",
    });
  });

  it.each([
    [["--metrics-emf-interval=5s"], "--metrics-emf-interval must be 0 (off) or from 10s to 1h"],
    [["--metrics-emf-interval=2h"], "--metrics-emf-interval must be 0 (off) or from 10s to 1h"],
    [["--metrics-emf-namespace=AWS/ECS"], "--metrics-emf-namespace"],
    [["--metrics-emf-namespace="], "--metrics-emf-namespace"],
    [["--metrics-emf-namespace=kgw\u0000x"], "--metrics-emf-namespace"],
  ])("refuses %j", (args, message) => {
    expect(() => parse([...dropIn, ...args])).toThrow(ConfigError);
    expect(() => parse([...dropIn, ...args])).toThrow(message);
  });
});
