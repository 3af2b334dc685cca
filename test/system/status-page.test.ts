/**
 * The admin port's status page in a real browser (Debian's headless Chromium, driven by
 * playwright-core): a fleet of three real `kgw server` processes on one DynamoDB table (dynalite),
 * one of them killed with SIGKILL, and two tenants whose real `kgw agent` processes sit behind
 * sticky TCP fronts on known instances. The page, asked of the instance that does not hold one
 * tenant's agent (so that part of its answer comes over the peer link), must show each agent on
 * its instance, the dead instance marked, a refused dial by its reason; and the screenshot must
 * show the rows the DOM has, drawn with the page's stylesheet (the dead row tinted, the live one
 * not), which the browser applies only if the policy's hash matches.
 *
 * Hostile text: a gateway admits only agent ids and versions of a strict pattern, so the strings a
 * page shows that no check shaped are a peer's (parseSlice believes a slice's shape, not its
 * text: a peer of another version, or a subverted one, decides them). The real page routes are
 * served on loopback over a reading whose peer answered markup in every string, and the page must
 * show it as text that never runs.
 */
import { execFileSync } from "node:child_process";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { silentLogger } from "../../lib/observability/logger.js";
import { statusPageRoutes } from "../../lib/server/status/page/page-routes.js";
import type { FleetStatus, InstanceSlice } from "../../lib/server/status/status-model.js";
import { statusReader } from "../../lib/server/status/status-reader.js";
import { statusRoutes } from "../../lib/server/status/status-routes.js";
import { type Routes, startHttpServer } from "../../lib/transport/http-endpoints.js";
import { type LocalDynamo, startLocalDynamo } from "../helpers/dynalite.js";
import {
  type CreatedFleetTenant,
  createTableTenant,
  type FleetInstance,
  makeFleet,
  spawnFleetAgent,
  startTcpFront,
  type TcpFront,
  tempDir,
  waitUntil,
} from "../helpers/fleet.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import type { KgwProcess } from "../helpers/kgw-process.js";
import { getPeerPki } from "../helpers/peer.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { decodePng, type Image } from "../helpers/png.js";
import { overrideProcessEnv } from "../helpers/process-env.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

/** What a peer may send as any string of its slice: markup that would run if the page took it as such. */
const HOSTILE = `<script>window.kgwPwned=1</script><img src=x onerror="window.kgwPwned=2">&amp;'`;
/** Each tenant's agent goes to the first live instance of its order (the sticky front). */
const ORDER = { acme: [0, 1], globex: [1, 0] } as const;
type TenantId = keyof typeof ORDER;
/** Killed before the page is opened: the peer that does not answer. */
const DEAD = 2;
/** The page is asked of fleet-2: acme's agent (on fleet-1) is known to it only over the peer link. */
const ASKED = 1;
/** The dead row's background (page-style.ts: tr.down, #ffebe9) and a live row's (the page's, white). */
const DOWN_TINT = [0xff, 0xeb, 0xe9] as const;
const WHITE = [0xff, 0xff, 0xff] as const;
const VIEWPORT = { width: 1400, height: 900 };

let pki: TestPki;
let dynamo: LocalDynamo;
let work: ReturnType<typeof tempDir>;
let fleet: FleetInstance[] = [];
let baseline: Map<string, number>;
let browser: Browser | undefined;
let page: Page;
const tenants = {} as Record<TenantId, CreatedFleetTenant>;
const agents: { tenant: TenantId; process: KgwProcess; front: TcpFront }[] = [];
let restoreEnv: (() => void) | undefined;

/** Debian's chromium on the PATH (.ci/run installs it); a clear failure, not a hang, without it. */
function chromiumPath(): string {
  try {
    return execFileSync("sh", ["-c", "command -v chromium"], { encoding: "utf8" }).trim();
  } catch {
    throw new Error(
      "Debian's chromium is not on the PATH: apt-get install chromium (.ci/run installs it when `command -v chromium` fails)",
    );
  }
}

const adminBase = (i: number) => `http://127.0.0.1:${fleet[i]!.ports.admin}`;

async function fleetStatusAt(i: number): Promise<FleetStatus> {
  return (await (await fetch(`${adminBase(i)}/status`)).json()) as FleetStatus;
}

/**
 * Reloads the page until `read` gives `want`, or fails with what it gave last. An agent looking for
 * `serverCount` instances through a sticky front opens a second stream to the same one now and
 * then, and closes it once it reads that instance's serverID: for a moment the tenant has two
 * streams there.
 */
async function reloadUntil<T>(read: () => Promise<T>, want: T, timeoutMs = 20_000): Promise<void> {
  let last: T | undefined;
  await waitUntil(
    async () => {
      last = await read();
      if (JSON.stringify(last) === JSON.stringify(want)) return true;
      await page.reload();
      return false;
    },
    timeoutMs,
    "the page shows what the fleet holds",
  ).catch((err: Error) => {
    throw new Error(`${err.message}: it showed ${JSON.stringify(last)}, expected ${JSON.stringify(want)}`);
  });
}

/** How many of the region's pixels are `rgb` (exactly), and how many are dark (text). */
function census(
  img: Image,
  box: { x: number; y: number; width: number; height: number },
  rgb: readonly number[],
) {
  let same = 0;
  let dark = 0;
  let total = 0;
  for (let y = Math.ceil(box.y); y < Math.floor(box.y + box.height); y++)
    for (let x = Math.ceil(box.x); x < Math.floor(box.x + box.width); x++) {
      const [r, g, b] = img.pixel(x, y);
      total++;
      if (r === rgb[0] && g === rgb[1] && b === rgb[2]) same++;
      if (r + g + b < 3 * 110) dark++;
    }
  return { same: same / total, dark, total };
}

/**
 * The admin port's routes over a reading in which peer fleet-9 answered markup in every free
 * string (agent id, remote address, version, the last error's dial id) and fleet-8 did not answer,
 * for a reason that is markup too.
 */
function hostileRoutes(): Routes {
  const at = new Date().toISOString();
  const slice: InstanceSlice = {
    apiVersion: "kgw.status/v1",
    instance: "fleet-9",
    version: HOSTILE,
    startedAt: at,
    uptimeSeconds: 1,
    draining: false,
    agents: 1,
    tunnels: 0,
    tenants: [
      {
        tenant: "acme",
        agents: [
          {
            agentId: HOSTILE,
            instance: "fleet-9",
            remoteAddress: HOSTILE,
            transport: "tunnel",
            agentVersion: HOSTILE,
            connectedSince: at,
            lastSeen: at,
            responsive: true,
            load: 0,
          },
        ],
        openTunnels: 0,
        recent: { windowMinutes: 15, dials: { denied: 1 }, failures: { [HOSTILE]: 1 } },
        lastError: { at, code: null, outcome: "denied", dialId: HOSTILE, instance: "fleet-9" },
        credentials: [{ id: HOSTILE, role: "caller", lastUsed: at }],
      },
    ],
  };
  const read = statusReader({
    instance: "fleet-9",
    local: () => slice,
    fleet: async (self) => [
      {
        id: "fleet-9",
        peerAddress: "127.0.0.1:1",
        lease: "live",
        leaseExpiresAt: null,
        slice: self,
        reason: null,
      },
      {
        id: "fleet-8",
        peerAddress: "127.0.0.1:2",
        lease: "live",
        leaseExpiresAt: null,
        slice: null,
        reason: HOSTILE,
      },
    ],
  });
  return { ...statusRoutes(read), ...statusPageRoutes(read) };
}

beforeAll(async () => {
  const executablePath = chromiumPath();
  pki = await getTestPki();
  const peer = await getPeerPki(pki);
  baseline = resources();
  work = tempDir("kgw-status-page-");
  dynamo = await startLocalDynamo();
  restoreEnv = overrideProcessEnv(dynamo.env);
  for (const id of Object.keys(ORDER) as TenantId[])
    tenants[id] = await createTableTenant(pki, dynamo.tableName, id, work.dir);
  fleet = await makeFleet(
    { pki, peerFiles: peer.files, table: dynamo.tableName, dynamoEnv: dynamo.env },
    3,
    work.dir,
  );
  await Promise.all(fleet.map((f) => f.start()));
  for (const tenant of Object.keys(ORDER) as TenantId[]) {
    const front = await startTcpFront(() => ORDER[tenant].map((i) => fleet[i]!.ports.agent), "sticky");
    const p = spawnFleetAgent(pki, front.port, tenants[tenant].agentToken, `${tenant}-agent`);
    agents.push({ tenant, process: p, front });
  }
  let where: Record<string, string> = {};
  await waitUntil(
    async () => {
      const s = await fleetStatusAt(ASKED);
      where = Object.fromEntries(s.tenants.map((t) => [t.tenant, t.instances.join(",")]));
      return where.acme === "fleet-1" && where.globex === "fleet-2";
    },
    30_000,
    "both agents where their fronts put them",
  ).catch((err: Error) => {
    const outputs = agents.map((a) => `${a.tenant}'s agent: ${a.process.output.join("").slice(-1500)}`);
    throw new Error(`${err.message}: saw ${JSON.stringify(where)}\n${outputs.join("\n")}`);
  });
  // A dial acme's egress policy refuses (cloud metadata): a refusal by reason, and the caller
  // token's last use.
  const denied = await connectOnGatewayPort(
    pki,
    fleet[0]!.ports.agent,
    { token: tenants.acme.callerToken },
    "169.254.169.254:80",
  );
  denied.socket.destroy();
  expect(denied.status).toBe(403);
  await fleet[DEAD]!.kill9();
  await waitUntil(
    async () => {
      const entry = (await fleetStatusAt(ASKED)).instances.find((x) => x.id === fleet[DEAD]!.id);
      return entry?.answered === false && entry.lease !== "live";
    },
    30_000,
    "the killed instance's lease expired",
  );
  browser = await chromium.launch({ executablePath, timeout: 30_000 });
  page = await browser.newPage({ viewport: VIEWPORT, javaScriptEnabled: true });
}, 120_000);

afterEach((ctx) => {
  if (ctx.task.result?.state !== "fail") return;
  for (const f of fleet) console.log(`---- ${f.id}:\n${f.log().trim().split("\n").slice(-30).join("\n")}`);
  for (const a of agents) console.log(`---- ${a.tenant}'s agent:\n${a.process.output.join("").slice(-2000)}`);
});

afterAll(async () => {
  await browser?.close();
  for (const a of agents) {
    a.process.child.kill("SIGTERM");
    await a.process.exited;
    await a.front.close();
  }
  await Promise.all(fleet.map((f) => (f.running ? f.terminate() : undefined)));
  await dynamo?.close();
  restoreEnv?.();
  // Unset when the suite stopped before starting anything (no chromium).
  if (baseline) await expectNoLeakedResources(baseline);
  work?.remove();
}, 60_000);

describe("the status page in headless Chromium", () => {
  it("shows the fleet: each instance (the dead one marked), each tenant on the instance its agent is on", async () => {
    const res = await page.goto(`${adminBase(ASKED)}/ui`);
    expect(res?.status()).toBe(200);
    const headers = res!.headers();
    expect(headers["content-security-policy"]).toMatch(/^default-src 'none'; style-src 'sha256-/);
    expect(headers["x-content-type-options"]).toBe("nosniff");
    expect(headers["cache-control"]).toBe("no-store");
    expect(await page.locator('meta[http-equiv="refresh"]').getAttribute("content")).toBe("10");

    const instance = (id: string) => page.locator(`tr.instance[data-instance="${id}"]`);
    for (const id of ["fleet-1", "fleet-2"]) {
      expect(await instance(id).getAttribute("class")).toBe("instance up");
      expect(await instance(id).locator("td.state").textContent()).toBe("answered");
    }
    expect(await instance("fleet-3").getAttribute("class")).toBe("instance down");
    expect(await instance("fleet-3").locator("td.state").textContent()).toMatch(
      /^did not answer: lease (expired|gone)/,
    );
    expect(await page.locator("#partial").textContent()).toContain("fleet-3 did not answer");

    const tenantCells = async (id: string) =>
      page.locator(`tr.tenant[data-tenant="${id}"] td`).allTextContents();
    await reloadUntil(
      async () => [(await tenantCells("acme")).slice(0, 3), (await tenantCells("globex")).slice(0, 3)],
      [
        ["acme", "1", "fleet-1"],
        ["globex", "1", "fleet-2"],
      ],
    );
    expect((await tenantCells("acme"))[5]).toBe("ERR_DESTINATION_NOT_ALLOWED 1");
  });

  it("a tenant's page: its agent on its instance, the refusal by reason, the caller token's last use", async () => {
    await page.goto(`${adminBase(ASKED)}/ui`);
    await page.locator('tr.tenant[data-tenant="acme"] a').click();
    await page.waitForURL(/\/ui\/tenants\/acme$/);
    const agent = page.locator("tr.agent");
    await reloadUntil(() => agent.count(), 1);
    const cells = await agent.locator("td").allTextContents();
    expect(cells[0]).toBe("acme-agent");
    expect(cells[1]).toBe("fleet-1");
    expect(cells[2]).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(cells[3]).toBe("tunnel");
    expect(await page.locator("#failures").textContent()).toBe("ERR_DESTINATION_NOT_ALLOWED 1");
    expect(await page.locator("#last-error").textContent()).toMatch(
      /^ERR_DESTINATION_NOT_ALLOWED at .* on fleet-1\)$/,
    );
    const tokenId = tenants.acme.callerToken.split("_")[3]!;
    const caller = page.locator(`tr.credential[data-credential="token:${tokenId}"] td`);
    expect((await caller.allTextContents()).slice(0, 2)).toEqual([`token:${tokenId}`, "caller"]);
  });

  it("markup in a peer's answer is shown as text and never runs", async () => {
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const admin = await startHttpServer("127.0.0.1", 0, hostileRoutes(), silentLogger());
    try {
      const base = `http://127.0.0.1:${admin.address.port}`;
      for (const path of ["/ui", "/ui/tenants/acme"]) {
        await page.goto(`${base}${path}`);
        expect(await page.locator("script, img").count()).toBe(0);
        expect(await page.evaluate("typeof window.kgwPwned")).toBe("undefined");
      }
      // On acme's page: the peer's agent, every string of it exactly as sent.
      const row = page.locator('tr.agent[data-instance="fleet-9"]');
      expect(await row.getAttribute("data-agent")).toBe(HOSTILE);
      const cells = await row.locator("td").allTextContents();
      expect([cells[0], cells[2], cells[4]]).toEqual([HOSTILE, HOSTILE, HOSTILE]);
      expect(await page.locator("#last-error").textContent()).toContain(HOSTILE);
      expect(await page.locator('tr.instance[data-instance="fleet-8"] td.state').textContent()).toBe(
        `did not answer: ${HOSTILE}`,
      );
      expect(errors).toEqual([]);
    } finally {
      await admin.close();
    }
  });

  it("the screenshot shows the rows the page has: drawn, with the dead instance tinted and a live one not", async () => {
    await page.goto(`${adminBase(ASKED)}/ui`);
    const img = decodePng(await page.screenshot({ fullPage: true }));
    expect(img.width).toBe(VIEWPORT.width);
    expect(img.height).toBeGreaterThanOrEqual(VIEWPORT.height);
    const box = async (selector: string) => {
      const b = await page.locator(selector).boundingBox();
      if (!b) throw new Error(`${selector} is not drawn`);
      expect(b.x + b.width).toBeLessThanOrEqual(img.width);
      expect(b.y + b.height).toBeLessThanOrEqual(img.height);
      return b;
    };
    const dead = census(img, await box('tr.instance[data-instance="fleet-3"]'), DOWN_TINT);
    const live = census(img, await box('tr.instance[data-instance="fleet-1"]'), DOWN_TINT);
    const acme = census(img, await box('tr.tenant[data-tenant="acme"]'), WHITE);
    // The tint fills most of the dead row (text and borders take the rest) and none of a live one.
    expect(dead.same).toBeGreaterThan(0.5);
    expect(live.same).toBe(0);
    expect(acme.same).toBeGreaterThan(0.5);
    // Each row has text drawn in it: not a blank band.
    for (const r of [dead, live, acme]) expect(r.dark).toBeGreaterThan(50);
  });
});
