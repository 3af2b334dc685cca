/**
 * fleet:local's flags and port layout (lib/demo/local-fleet-options.ts): what --base-port and
 * --ephemeral-ports give, what they refuse, and the check that names a taken port with what it
 * is for before anything starts.
 */
import { createServer, type Server } from "node:net";
import { afterEach, expect, it } from "vitest";
import {
  checkPortsFree,
  namedPorts,
  PortInUseError,
  parseLocalFleetOptions,
  portLayout,
} from "../../lib/demo/local-fleet-options.js";
import { ConfigError } from "../../lib/errors.js";
import { closedPort } from "../helpers/backends.js";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((r) => s.close(() => r()))));
});

const options = (argv: string[]) => {
  const parsed = parseLocalFleetOptions(argv);
  if (parsed.help) throw new Error("unexpected help");
  return parsed.options;
};

it("defaults to base 18000: the balancer on 18032, instance i on 18i32..18i35, the agent on 18093/18094", () => {
  const o = options([]);
  expect(o).toEqual({ once: false, basePort: 18_000, portsFile: "" });
  const layout = portLayout(o.basePort);
  expect(layout.balancer).toBe(18_032);
  expect(layout.instances[2]).toEqual({ agent: 18_232, admin: 18_233, health: 18_234, peer: 18_235 });
  expect([layout.agentHealth, layout.agentAdmin]).toEqual([18_093, 18_094]);
  const ports = namedPorts(layout).map((p) => p.port);
  expect(new Set(ports).size).toBe(ports.length); // no port used twice
});

it("--ephemeral-ports makes every port 0; --base-port moves them all", () => {
  expect(namedPorts(portLayout(options(["--ephemeral-ports"]).basePort)).every((p) => p.port === 0)).toBe(
    true,
  );
  expect(portLayout(options(["--base-port=28000"]).basePort).instances[3].peer).toBe(28_335);
});

it.each([
  [["--base-port=65300"], "--base-port must be at most 65200"],
  [["--base-port=28000", "--ephemeral-ports"], "exclude each other"],
  [["--base-port=x"], "--base-port"],
  [["--no-such-flag"], "unknown flag --no-such-flag"],
])("refuses %j", (argv, message) => {
  expect(() => parseLocalFleetOptions(argv)).toThrow(ConfigError);
  expect(() => parseLocalFleetOptions(argv)).toThrow(message);
});

it("--help lists every flag", () => {
  const parsed = parseLocalFleetOptions(["--help"]);
  expect(parsed.help).toBe(true);
  if (!parsed.help) return;
  for (const flag of ["--once", "--base-port", "--ephemeral-ports", "--ports-file"])
    expect(parsed.text).toContain(flag);
});

it("a taken port of the layout is named with what it is for", async () => {
  // Hold the port that is instance 1's health port for a base chosen around it.
  const held = await closedPort();
  const s = createServer();
  await new Promise<void>((r) => s.listen(held, "127.0.0.1", r));
  servers.push(s);
  const layout = portLayout(held - 134);
  const err = await checkPortsFree(layout).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(PortInUseError);
  // Only the balancer's and instance 1's agent and admin ports are checked before it; on a shared
  // machine one of those may be taken by something else, which is named the same way.
  const named = (err as PortInUseError).port === held ? "instance 1's health port" : "";
  expect((err as Error).message).toContain(
    named ? `port ${held} (${named}) is already in use` : "is already in use",
  );
  expect((err as Error).message).toContain("--base-port=<another base> or --ephemeral-ports");
});

it("a layout with every port free passes the check (and leaves them free)", async () => {
  await expect(checkPortsFree(portLayout(null))).resolves.toBeUndefined();
});
