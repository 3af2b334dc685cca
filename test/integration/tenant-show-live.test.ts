/**
 * `kgw tenant show` with an admin address, as an operator uses it before revoking a token: the
 * stored tenant plus its live state from a real gateway's status API (its agent where it is, a
 * refused dial by reason, the last error, each credential's last use beside the credential), in
 * the table and under `live` in --json; the same address form and environment variable as
 * `kgw status`; and an admin address that does not answer: the credentials still printed, a
 * warning naming the address, exit 1.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { parseTenantCommand } from "../../lib/commands/tenant/parse-tenant-command.js";
import { runTenantCommand } from "../../lib/commands/tenant/run-tenant-command.js";
import type { TenantStatus } from "../../lib/server/status/status-model.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { closedPort } from "../helpers/backends.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let agent: RunningAgent;
let acme: CreatedTenant;
let baseline: Map<string, number>;
let deadAdmin: string;

const tokenId = (token: string) => token.split("_")[3]!;

/** `kgw tenant <argv>` in-process, on the test store, with `env` added to its environment. */
async function kgw(argv: string[], env: Record<string, string> = {}) {
  let out = "";
  let err = "";
  let parsed: ReturnType<typeof parseTenantCommand>;
  try {
    parsed = parseTenantCommand(argv, { KGW_TENANT_STORE_DIR: store.dir, ...env });
  } catch (e) {
    return { code: 2, out, err: (e as Error).message };
  }
  if (parsed.help) return { code: 0, out: parsed.text, err };
  const code = await runTenantCommand(parsed.command, {
    out: (text) => {
      out += text;
    },
    err: (text) => {
      err += text;
    },
  });
  return { code, out, err };
}

beforeAll(async () => {
  baseline = resources();
  pki = await getTestPki();
  store = makeTenantStore(pki);
  acme = await store.create("acme");
  t = await startTenantGateway(store.dir);
  ({ agent } = await startTestAgent(pki, t.gw.addresses.agent.port, [
    `--agent-token=${acme.agentToken}`,
    "--agent-id=acme-agent",
  ]));
  await waitFor(() => t.gw.registry.size === 1, 5000, "acme's agent connected");
  // A dial acme's egress policy refuses (cloud metadata): a failure by reason, and the caller
  // token's last use.
  const denied = await connectOnGatewayPort(
    pki,
    t.gw.addresses.agent.port,
    { token: acme.callerToken },
    "169.254.169.254:80",
  );
  denied.socket.destroy();
  expect(denied.status).toBe(403);
  deadAdmin = `http://127.0.0.1:${await closedPort()}`;
});

afterAll(async () => {
  await agent?.stop();
  await t?.gw.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

describe("kgw tenant show --admin-url", () => {
  it("the table: each credential's last use beside it, then the agent where it is, failures by reason, the last error", async () => {
    const r = await kgw(["show", "acme", `--admin-url=http://${t.admin}`]);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/KIND\s+ID\s+STATUS\s+CREATED\s+ENDS\s+LAST USED/);
    const row = (id: string) => r.out.split("\n").find((l) => l.includes(id)) ?? "";
    expect(row(tokenId(acme.callerToken))).toMatch(/^caller-token\s.*\s\d{4}-\d\d-\d\dT[\d:.]+Z$/);
    expect(row(tokenId(acme.agentToken))).toMatch(/^agent-token\s.*\s\d{4}-\d\d-\d\dT[\d:.]+Z$/);
    // The caller certificate never authenticated: "-", not a made-up time.
    expect(row(acme.callerSerial)).toMatch(/\s-$/);
    expect(r.out).toContain(`LIVE STATE from http://${t.admin}. Answered by`);
    expect(r.out).toMatch(/\nacme-agent\s+\S+\s+127\.0\.0\.1:\d+\s+tunnel\s/);
    expect(r.out).toContain("FAILURES BY REASON: ERR_DESTINATION_NOT_ALLOWED=1");
    expect(r.out).toMatch(/LAST ERROR: ERR_DESTINATION_NOT_ALLOWED at /);
  });

  it("--json: the stored tenant under `tenant`, the status API's answer under `live`", async () => {
    const r = await kgw(["show", "acme", `--admin-url=http://${t.admin}`, "--json"]);
    expect(r.code).toBe(0);
    const body = JSON.parse(r.out) as { tenant: { id: string }; live: TenantStatus; liveError?: string };
    expect(body.tenant.id).toBe("acme");
    expect(body.liveError).toBeUndefined();
    expect(body.live.apiVersion).toBe("kgw.status/v1");
    expect(body.live.tenant.agents.map((a) => a.agentId)).toEqual(["acme-agent"]);
    expect(body.live.tenant.recent.failures).toEqual({ ERR_DESTINATION_NOT_ALLOWED: 1 });
    expect(body.live.tenant.credentials.map((c) => c.id)).toContain(`token:${tokenId(acme.callerToken)}`);
  });

  it("KGW_ADMIN_URL, as for kgw status, gives the address; without one, the store's view only, as before", async () => {
    const withEnv = await kgw(["show", "acme", "--json"], { KGW_ADMIN_URL: `http://${t.admin}` });
    expect((JSON.parse(withEnv.out) as { live: TenantStatus }).live.tenant.tenant).toBe("acme");
    const plain = await kgw(["show", "acme", "--json"]);
    expect(plain.code).toBe(0);
    expect(Object.keys(JSON.parse(plain.out) as object)).toEqual(["tenant"]);
    const table = await kgw(["show", "acme"]);
    expect(table.out).not.toMatch(/LAST USED|LIVE STATE/);
  });

  it("an admin address that does not answer: the credentials still printed, a warning naming it, exit 1", async () => {
    const r = await kgw(["show", "acme", `--admin-url=${deadAdmin}`]);
    expect(r.code).toBe(1);
    expect(r.out).toContain(tokenId(acme.callerToken));
    expect(r.out).not.toContain("LIVE STATE");
    expect(r.err).toBe(
      `kgw tenant show: warning: the stored tenant is shown without its live state: the admin address ${deadAdmin} did not answer: connection refused\n`,
    );
    const json = await kgw(["show", "acme", `--admin-url=${deadAdmin}`, "--json"]);
    expect(json.code).toBe(1);
    const body = JSON.parse(json.out) as { tenant: { id: string }; live: null; liveError: string };
    expect(body).toMatchObject({ tenant: { id: "acme" }, live: null });
    expect(body.liveError).toContain(deadAdmin);
  });

  it("a missing tenant is exit 3 before the admin address is asked; a bad address, or the flag elsewhere, exit 2", async () => {
    const missing = await kgw(["show", "initech", `--admin-url=${deadAdmin}`]);
    expect(missing.code).toBe(3);
    expect(missing.err).not.toContain("admin address");
    expect((await kgw(["show", "acme", "--admin-url=http://host:8133/status"])).code).toBe(2);
    expect((await kgw(["show", "acme", "--admin-url=ftp://host"])).code).toBe(2);
    const elsewhere = await kgw(["list", `--admin-url=http://${t.admin}`]);
    expect([elsewhere.code, elsewhere.err]).toEqual([2, "--admin-url does not apply to kgw tenant list"]);
  });

  it("kgw tenant show --help names the flag and its variable", async () => {
    const r = await kgw(["show", "--help"]);
    expect(r.out).toMatch(/--admin-url/);
    expect(r.out).toMatch(/KGW_ADMIN_URL/);
  });
});
