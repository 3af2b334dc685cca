/**
 * --dial-step-metrics (lib/observability/dial-steps.ts): a tenant-mode gateway with it times every
 * step of a CONNECT dial in kgw_server_dial_step_seconds{step}, each step once per dial, so that
 * the dial path's cost table (bench `dial-steps`) can divide sums by counts; a dial refused by the
 * tenant's egress policy counts the steps before the policy only. Without the flag there is no
 * such metric at all.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { DIAL_STEPS } from "../../lib/observability/dial-steps.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { bodyText, httpOver } from "../helpers/connect-client.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { activeResources, expectNoLeakedResources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

const METRIC = "kgw_server_dial_step_seconds";

let baseline: Map<string, number>;
let pki: TestPki;
let store: TestTenantStore;
let timed: TestGateway;
let plain: TestGateway;
let backend: HttpBackend;
let tenant: CreatedTenant;
const agents: RunningAgent[] = [];

beforeAll(async () => {
  baseline = activeResources();
  pki = await getTestPki();
  store = makeTenantStore(pki);
  tenant = await store.create("acme");
  [timed, plain] = await Promise.all([
    startTenantGateway(store.dir, ["--dial-step-metrics"]),
    startTenantGateway(store.dir),
  ]);
  backend = await startHttpBackend();
  for (const gw of [timed, plain]) {
    const { agent } = await startTestAgent(pki, gw.gw.addresses.agent.port, [
      `--agent-token=${tenant.agentToken}`,
      "--agent-id=acme-agent",
    ]);
    agents.push(agent);
    await waitFor(() => gw.gw.registry.size === 1, 5000, "the agent connected");
  }
});

afterAll(async () => {
  for (const a of agents) await a.stop();
  await Promise.all([timed?.gw.close(), plain?.gw.close()]);
  await backend?.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

/** Per step: the histogram's count and sum (s). */
async function steps(gw: TestGateway): Promise<Record<string, { count: number; sum: number }>> {
  const text = await gw.gw.metrics.registry.metrics();
  const out: Record<string, { count: number; sum: number }> = {};
  for (const step of DIAL_STEPS) {
    const read = (suffix: string) =>
      Number(
        text
          .split("\n")
          .find((l) => l.startsWith(`${METRIC}_${suffix}{step="${step}"}`))
          ?.split(" ")
          .pop() ?? 0,
      );
    out[step] = { count: read("count"), sum: read("sum") };
  }
  return out;
}

async function helloVia(gw: TestGateway, target: string): Promise<number> {
  const caller = { token: tenant.callerToken };
  const r = await connectOnGatewayPort(pki, gw.gw.addresses.agent.port, caller, target);
  if (r.status === 200)
    expect(await bodyText(await httpOver(r.socket, "/hello"))).toBe("hello from the backend");
  r.socket.destroy();
  return r.status;
}

describe("--dial-step-metrics", () => {
  it("times each step of a CONNECT dial once, and their sum is the dial's time in the server", async () => {
    const before = await steps(timed);
    expect(await helloVia(timed, backend.address)).toBe(200);
    // The first byte is marked when the backend's answer is handed to the caller: poll for it.
    await waitFor(
      async () => (await steps(timed))["first-byte"]!.count === before["first-byte"]!.count + 1,
      5000,
      "the first byte marked",
    );
    const after = await steps(timed);
    for (const step of DIAL_STEPS) {
      expect({ step, dials: after[step]!.count - before[step]!.count }).toEqual({ step, dials: 1 });
      expect(after[step]!.sum - before[step]!.sum).toBeGreaterThanOrEqual(0);
    }
  });

  it("a dial the egress policy refuses counts the steps before the policy, and no others", async () => {
    const before = await steps(timed);
    // Link-local (the cloud metadata address): refused by every tenant's default egress policy.
    expect(await helloVia(timed, "169.254.169.254:80")).not.toBe(200);
    const after = await steps(timed);
    const counted = DIAL_STEPS.filter((s) => after[s]!.count > before[s]!.count);
    expect(counted).toEqual(["identity", "audit"]);
  });

  it("without the flag, no step is timed and the metric does not exist", async () => {
    expect(await helloVia(plain, backend.address)).toBe(200);
    expect(await plain.gw.metrics.registry.metrics()).not.toContain(METRIC);
  });
});
