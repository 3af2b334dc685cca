/**
 * The agent's common layout, upstream's as ours: a DaemonSet, one agent per node, each on its own
 * connection. A gateway started with the default quotas (no --tenant-max-agents) must take an
 * ordinary cluster's agents, here 200 nodes of one tenant and 200 of another, every one of them
 * admitted and none refused by a quota. The agents are raw gRPC agent streams (AgentService.
 * Connect, as upstream's proxy-agent opens them), so that 400 of them cost the test little.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/agent.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { type PacketCall, RawClient, responseHeaders, tlsCredentials } from "../helpers/grpc-clients.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

/** Nodes per cluster: a small production cluster, far below Kubernetes' 5,000. */
const NODES = 200;
/**
 * Agents started at once: every connection here comes from 127.0.0.1, which the per-source
 * handshake limit (64 in progress) counts as one address; a DaemonSet's agents come from one
 * address per node.
 */
const WAVE = 20;

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
const tenants: Record<string, CreatedTenant> = {};
const clients: RawClient[] = [];
const calls: PacketCall[] = [];

beforeAll(async () => {
  pki = await getTestPki();
  store = makeTenantStore(pki);
  tenants.acme = await store.create("acme");
  tenants.globex = await store.create("globex");
  t = await startTenantGateway(store.dir);
});

afterAll(async () => {
  for (const c of calls) c.cancel();
  for (const c of clients) c.close();
  await t?.gw.close();
  store?.remove();
});

/** One node's agent of `tenant`: its own connection and stream; resolves once admitted. */
async function nodeAgent(tenant: string, node: number): Promise<void> {
  const client = new RawClient(t.agent, tlsCredentials(pki, "none"));
  clients.push(client);
  const call = client.connect({
    agentid: `${tenant}-node-${node}`,
    authorization: `Bearer ${tenants[tenant]!.agentToken}`,
  });
  call.on("error", () => {});
  calls.push(call);
  await responseHeaders(call);
}

const refusals = async () =>
  (await t.gw.metrics.quotaRefusals.get()).values.find((v) => v.labels.quota === "maxAgents")?.value ?? 0;

describe("default quotas", () => {
  it(`admit a DaemonSet of ${NODES} agents for each of two tenants`, async () => {
    const refused: string[] = [];
    for (const tenant of ["acme", "globex"]) {
      for (let first = 0; first < NODES; first += WAVE) {
        const wave = Array.from({ length: Math.min(WAVE, NODES - first) }, (_, i) =>
          nodeAgent(tenant, first + i),
        );
        for (const o of await Promise.allSettled(wave)) {
          if (o.status === "rejected") refused.push(`${tenant}: ${(o.reason as Error).message}`);
        }
      }
    }
    console.log(`daemonset: ${2 * NODES} agents of two tenants, ${refused.length} refused`);
    expect(refused).toEqual([]);
    await waitFor(() => t.gw.registry.size === 2 * NODES, 10_000, "every agent registered");
    expect(t.gw.registry.agents("acme")).toHaveLength(NODES);
    expect(t.gw.registry.agents("globex")).toHaveLength(NODES);
    expect(await refusals()).toBe(0);
  }, 60_000);
});
