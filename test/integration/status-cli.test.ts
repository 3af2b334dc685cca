/**
 * `kgw status` against a stand-in admin port on loopback: what it prints (tables, JSON), what it
 * refuses on its command line, how it fails when the address does not answer or answers with
 * something else (exit 1, naming the address), that nothing in an answer can drive the terminal,
 * and that --watch refreshes until stopped.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseStatusCommand, type StatusCommand } from "../../lib/commands/status/parse-status-command.js";
import { runStatusCommand } from "../../lib/commands/status/run-status-command.js";
import { fleetStatus, tenantStatus } from "../../lib/server/status/fleet-status.js";
import type { InstanceSlice } from "../../lib/server/status/status-model.js";
import { closedPort } from "../helpers/backends.js";

const T0 = Date.parse("2026-12-05T12:00:00Z");

const slice: InstanceSlice = {
  apiVersion: "kgw.status/v1",
  instance: "i-1",
  version: "0.1.0",
  startedAt: new Date(T0).toISOString(),
  uptimeSeconds: 3725,
  draining: false,
  agents: 1,
  tunnels: 0,
  tenants: [
    {
      tenant: "acme",
      agents: [
        {
          agentId: "acme-agent\u001b[31m",
          instance: "i-1",
          remoteAddress: "10.0.0.9:40000",
          transport: "grpc",
          agentVersion: null,
          connectedSince: new Date(T0).toISOString(),
          lastSeen: new Date(T0).toISOString(),
          responsive: true,
          load: 0,
        },
      ],
      openTunnels: 0,
      recent: { windowMinutes: 15, dials: { ok: 3, denied: 1 }, failures: { ERR_FORBIDDEN: 1 } },
      lastError: {
        at: new Date(T0).toISOString(),
        code: "ERR_FORBIDDEN",
        outcome: "denied",
        dialId: "d-1",
        instance: "i-1",
      },
      credentials: [{ id: "token:0123456789abcdef", role: "caller", lastUsed: new Date(T0).toISOString() }],
    },
  ],
};

const answers = [
  {
    id: "i-1",
    peerAddress: "10.0.0.1:8135",
    lease: "live" as const,
    leaseExpiresAt: T0,
    slice,
    reason: null,
  },
  {
    id: "i-2",
    peerAddress: "10.0.0.2:8135",
    lease: "expired" as const,
    leaseExpiresAt: T0,
    slice: null,
    reason: "lease expired",
  },
];

let server: Server;
let url: string;
let requests = 0;

beforeAll(async () => {
  server = createServer((req, res) => {
    requests++;
    res.setHeader("content-type", "application/json");
    if (req.url === "/status") res.end(JSON.stringify(fleetStatus("i-1", answers, T0)));
    else if (req.url === "/status/tenants/acme")
      res.end(JSON.stringify(tenantStatus("i-1", answers, "acme", T0)));
    else if (req.url === "/status/tenants/html") {
      res.setHeader("content-type", "text/html");
      res.end("<html>not the API</html>");
    } else {
      res.statusCode = 404;
      res.end(JSON.stringify({ error: { code: "ERR_NOT_FOUND", message: "not found" } }));
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});

function parse(argv: string[]): StatusCommand {
  const p = parseStatusCommand(argv, {});
  if (p.help) throw new Error("unexpected help");
  return p.command;
}

async function run(cmd: StatusCommand, stopped: Promise<void> = new Promise(() => {})) {
  let out = "";
  let err = "";
  let clears = 0;
  const code = await runStatusCommand(cmd, {
    out: (t) => {
      out += t;
    },
    err: (t) => {
      err += t;
    },
    stopped,
    clear: () => {
      clears++;
    },
  });
  return { code, out, err, clears };
}

describe("kgw status's command line", () => {
  it("takes an admin address (flag or KGW_ADMIN_URL), one tenant, --json, --watch and --interval", () => {
    expect(parse([`--admin-url=${url}/`, "acme", "--json"])).toMatchObject({
      adminUrl: url,
      tenant: "acme",
      json: true,
    });
    const fromEnv = parseStatusCommand([], { KGW_ADMIN_URL: "http://10.0.0.1:8133" });
    expect(!fromEnv.help && fromEnv.command.adminUrl).toBe("http://10.0.0.1:8133");
    expect(parse(["--watch", "--interval=1s"])).toMatchObject({ watch: true, intervalMs: 1000 });
  });

  it.each([
    [["--admin-url=ftp://x"], /http/],
    [["--admin-url=not a url"], /not a URL/],
    [["--admin-url=http://h:8133/status"], /no path/],
    [["acme", "globex"], /at most one tenant/],
    [["Bad_Tenant"], /not a tenant id/],
    [["--interval=10ms"], /at least/],
    [["--nope"], /unknown flag/],
  ])("refuses %j", (argv, message) => {
    expect(() => parseStatusCommand(argv, {})).toThrow(message);
  });
});

describe("kgw status against an admin address", () => {
  it("prints the fleet: every instance (the dead one marked), every tenant with its failures", async () => {
    const r = await run(parse([`--admin-url=${url}`]));
    expect(r.code).toBe(0);
    expect(r.out).toContain("PARTIAL: i-2 did not answer");
    expect(r.out).toMatch(/i-1\s+live\s+yes\s+no\s+1\s+0\s+0\.1\.0\s+1h2m/);
    expect(r.out).toMatch(/i-2\s+expired\s+no\s+-.*lease expired/);
    expect(r.out).toMatch(/acme\s+1\s+i-1\s+0\s+4\s+ERR_FORBIDDEN=1\s+ERR_FORBIDDEN/);
  });

  it("prints one tenant: its agent (version unknown when not sent), failures, credentials; no control characters", async () => {
    const r = await run(parse([`--admin-url=${url}`, "acme"]));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/acme-agent\?\[31m\s+i-1\s+10\.0\.0\.9:40000\s+grpc\s+unknown/);
    expect(r.out).toContain("FAILURES BY REASON: ERR_FORBIDDEN=1");
    expect(r.out).toContain("LAST ERROR: ERR_FORBIDDEN at 2026-12-05T12:00:00.000Z (dial d-1 on i-1)");
    expect(r.out).toMatch(/token:0123456789abcdef\s+caller/);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: what must not be printed
    expect(r.out).not.toMatch(/\u001b/);
  });

  it("--json prints the API's JSON as it came", async () => {
    const r = await run(parse([`--admin-url=${url}`, "--json"]));
    expect(JSON.parse(r.out)).toEqual(fleetStatus("i-1", answers, T0));
  });

  it("an address where nothing listens: exit 1, naming it", async () => {
    const dead = `http://127.0.0.1:${await closedPort()}`;
    const r = await run(parse([`--admin-url=${dead}`]));
    expect(r.code).toBe(1);
    expect(r.out).toBe("");
    expect(r.err).toBe(`kgw status: the admin address ${dead} did not answer: connection refused\n`);
  });

  it("an answer that is not the status API, or an error: exit 1, saying so", async () => {
    const html = await run(parse([`--admin-url=${url}`, "html"]));
    expect(html.code).toBe(1);
    expect(html.err).toContain(
      `the admin address ${url} did not answer: HTTP 200, not the status API's JSON`,
    );
    const missing = await run(parse([`--admin-url=${url}`, "nobody"]));
    expect(missing.err).toContain("HTTP 404: not found");
  });

  it("--watch refreshes every --interval until stopped, then exits 0", async () => {
    let stop: () => void = () => {};
    const stopped = new Promise<void>((r) => {
      stop = r;
    });
    const before = requests;
    const running = run(parse([`--admin-url=${url}`, "--watch", "--interval=500ms"]), stopped);
    while (requests - before < 3) await new Promise((r) => setTimeout(r, 20));
    stop();
    const r = await running;
    expect(r.code).toBe(0);
    expect(r.clears).toBeGreaterThanOrEqual(3);
    expect(r.out.match(/INSTANCES/g)?.length).toBeGreaterThanOrEqual(3);
  });
});
