/**
 * One tenant's cluster for the two-tenant phase, set up the way an operator would: `kgw tenant
 * create` writes the tenant's bundle into a directory that is also its --mount-dir, and the
 * tenant's kube-apiserver runs with that directory's egress-selector-configuration.yaml, as
 * written. Beside it: the tenant's own fake node (kubelet and pod, on addresses of its own) and
 * the Node and Pod objects in the tenant's cluster (its own etcd prefix).
 */
import fs from "node:fs";
import path from "node:path";
import { type Proc, waitUntil } from "../interop/harness.js";
import type { Binaries } from "./build.js";
import { createClusterObjects } from "./cluster-objects.js";
import { issueKubeletCert, type KubePki, startTenantKubeApiserver } from "./control-plane.js";
import type { FakeNodeConfig } from "./fake-node.js";
import { KubeClient } from "./kube-client.js";
import type { NetNs } from "./netns.js";
import type { CreatedTenant, TenantCli } from "./tenant-cli.js";
import { KGW_TENANT_PORTS, KUBELET_PORT, POD_PORT, type TenantCluster } from "./topology.js";

/** What the suite's top-level setup made, which the two-tenant phase builds on. */
export interface SuiteContext {
  ns: NetNs;
  bins: Binaries;
  kp: KubePki;
  dir: string;
  bridgeDir: string;
  /** Starts one of this folder's programs in the namespace; resolves once it prints `ready`. */
  startHelper(name: string, file: string, args: string[], ready: string): Promise<Proc>;
}

export interface RunningTenant {
  cluster: TenantCluster;
  created: CreatedTenant;
  /** The agent token, in a file of its own (as a projected token would be), not in the bundle. */
  tokenFile: string;
  node: Proc;
  apiserver: Proc;
  kube: KubeClient;
}

/** The gateway's address as the bundle names it: kube-apiserver dials it and checks its certificate. */
export const TENANT_GATEWAY_ADDRESS = `127.0.0.1:${KGW_TENANT_PORTS.agent}`;

/** `kgw tenant create`, then the token file for the tenant's agents. */
export async function createTenant(
  ctx: SuiteContext,
  cli: TenantCli,
  cluster: TenantCluster,
): Promise<{ created: CreatedTenant; tokenFile: string }> {
  const created = await cli.create(
    cluster.id,
    path.join(ctx.dir, "bundles", cluster.id),
    TENANT_GATEWAY_ADDRESS,
  );
  const tokenFile = path.join(ctx.dir, `${cluster.id}-agent-token`);
  fs.writeFileSync(tokenFile, created.agentToken, { mode: 0o600 });
  return { created, tokenFile };
}

/** The tenant's node and kube-apiserver, up, with the cluster's objects written. */
export async function startTenantCluster(
  ctx: SuiteContext,
  cluster: TenantCluster,
  tenant: { created: CreatedTenant; tokenFile: string },
): Promise<RunningTenant> {
  const kubelet = await issueKubeletCert(ctx.kp, ctx.dir, cluster);
  const nodeConfig: FakeNodeConfig = {
    nodeIp: cluster.nodeIp,
    kubeletPort: KUBELET_PORT,
    podIp: cluster.podIp,
    podPort: POD_PORT,
    podName: cluster.podName,
    kubeletCert: kubelet.cert,
    kubeletKey: kubelet.key,
    clientCa: ctx.kp.pki.files.caCert,
  };
  const apiserver = startTenantKubeApiserver(
    ctx.ns,
    ctx.bins.kubeApiserver,
    ctx.dir,
    cluster,
    tenant.created.bundle.files.egressTcp,
    ctx.kp,
  );
  const node = await ctx.startHelper(
    `fake node (${cluster.id})`,
    "fake-node.ts",
    [JSON.stringify(nodeConfig)],
    "fake node ready",
  );
  const kube = new KubeClient(cluster.id, path.join(ctx.bridgeDir, `${cluster.apiserverPort}.sock`), {
    ca: ctx.kp.pki.files.caCert,
    cert: ctx.kp.adminCert,
    key: ctx.kp.adminKey,
  });
  await waitUntil(
    async () => (await kube.call("GET", "/readyz", { timeoutMs: 2000 })).status === 200,
    180_000,
    () => apiserver.tail(),
  );
  // A new prefix is a new cluster: its `default` namespace appears once the bootstrap controller ran.
  await waitUntil(async () => (await kube.call("GET", "/api/v1/namespaces/default")).status === 200, 30_000);
  await createClusterObjects(kube, cluster);
  return { cluster, ...tenant, node, apiserver, kube };
}
