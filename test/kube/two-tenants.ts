/**
 * Two tenants side by side on one gateway in tenant mode, each configured from its bundle
 * exactly as `kgw tenant create` wrote it: two kube-apiservers (two clusters on the shared etcd),
 * each with its tenant's egress-selector-configuration.yaml (HTTPConnect over TCP+mTLS to the
 * gateway's agent port, with the bundle's client certificate), two nodes, and one agent per
 * tenant with its tenant's token (acme: our agent; globex: upstream's proxy-agent).
 *
 * Every backend connection must belong to the calling tenant's agent process, and the other
 * tenant's node must see none. Without its agent, a tenant gets 503 at once (the other tenant's
 * agent, which could reach the node just as well inside the namespace, must not be used); a
 * revoked caller certificate cuts that tenant off from the gateway's next read of the store
 * (every 500 ms here; asserted within the suite's 5 s), the other tenant going on as before. An
 * egress policy narrowed to globex's kubelet (`kgw tenant policy`) has the gateway refuse its pod
 * with 403 before upstream's proxy-agent is asked to dial, and kube-apiserver passes that on.
 *
 * Called from kube.test.ts, whose setup (namespace, bridge, etcd, certificates, binaries) it
 * uses; it runs after the other phases, so their agents and servers are gone.
 */
import fs from "node:fs";
import type { IncomingMessage } from "node:http";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Proc, promValue, waitUntil } from "../interop/harness.js";
import { ANP_VERSION, KUBERNETES_VERSION } from "./build.js";
import type { ConnRecord } from "./fake-node.js";
import type { KubeResponse } from "./kube-client.js";
import { closedPeers, connMark, connRecordsSince } from "./node-log.js";
import {
  nsGet,
  type ProxyServer,
  startKgwAgent,
  startKgwTenantServer,
  startUpstreamAgent,
} from "./servers.js";
import { type TenantCli, tenantCli } from "./tenant-cli.js";
import {
  createTenant,
  type RunningTenant,
  type SuiteContext,
  startTenantCluster,
  TENANT_GATEWAY_ADDRESS,
} from "./tenant-clusters.js";
import {
  CONTAINER,
  KGW_TENANT_PORTS,
  KUBELET_PORT,
  LOG_TEXT,
  POD_PORT,
  TENANT_CLUSTERS,
} from "./topology.js";

const VERBOSE = Boolean(process.env.KGW_KUBE_VERBOSE);
/** The suite's bound for "at once" (kube-apiserver's own timeouts are far longer). */
const ERROR_WITHIN_MS = 5000;

export function twoTenants(suite: () => SuiteContext): void {
  describe(`kube-apiserver ${KUBERNETES_VERSION} ×2 → our server in tenant mode: two tenants, each from its bundle as written`, () => {
    let ctx: SuiteContext;
    let cli: TenantCli;
    let gateway: ProxyServer;
    const tenants: RunningTenant[] = [];
    const agents = new Map<string, Proc>();
    let generation = 0;
    const [acme, globex] = [0, 1].map((i) => () => tenants[i]!);

    /** Our agent or upstream's, as the tenant's topology says: either with nothing but the token. */
    const startAgent = (t: RunningTenant): Proc => {
      const id = `${t.cluster.id}-agent-${++generation}`;
      const port = KGW_TENANT_PORTS.agent;
      const auth = { tokenFile: t.tokenFile };
      const agent =
        t.cluster.agent === "ours"
          ? startKgwAgent(ctx.ns, ctx.kp.pki, port, id, auth, t.cluster.agentSlot)
          : startUpstreamAgent(
              ctx.ns,
              ctx.bins.upstreamAgent,
              ctx.kp.pki,
              port,
              id,
              t.cluster.agentSlot,
              auth,
            );
      agents.set(t.cluster.id, agent);
      return agent;
    };
    const agentOf = (t: RunningTenant) => agents.get(t.cluster.id)!;
    const waitForAgents = (n: number) =>
      waitUntil(
        async () => (await gateway.agents()) === n,
        20_000,
        () => [...agents.values(), gateway.proc].map((p) => p.tail()).join("\n"),
      );

    beforeAll(async () => {
      ctx = suite();
      const storeDir = path.join(ctx.dir, "tenant-store");
      cli = tenantCli(storeDir, ctx.kp.pki);
      // One after the other: the first `create` makes the store.
      const created: Awaited<ReturnType<typeof createTenant>>[] = [];
      for (const c of TENANT_CLUSTERS) created.push(await createTenant(ctx, cli, c));
      const [gw, running] = await Promise.all([
        startKgwTenantServer(ctx.ns, ctx.bridgeDir, ctx.kp.pki, storeDir),
        Promise.all(TENANT_CLUSTERS.map((c, i) => startTenantCluster(ctx, c, created[i]!))),
      ]);
      gateway = gw;
      tenants.push(...running);
      for (const t of tenants) startAgent(t);
      await waitForAgents(tenants.length);
    }, 240_000);

    afterAll(async () => {
      await Promise.all([...agents.values()].map((a) => a.stop()));
      // kube-apiservers before the gateway and etcd (the suite's teardown stops etcd).
      await Promise.all(tenants.map((t) => t.apiserver.stop()));
      await Promise.all([gateway?.stop(), ...tenants.map((t) => t.node.stop())]);
    }, 30_000);

    const nodeProxy = (t: RunningTenant) =>
      t.kube.call("GET", `/api/v1/nodes/${t.cluster.nodeName}/proxy/healthz`, {
        timeoutMs: ERROR_WITHIN_MS * 4,
      });
    const podLogs = (t: RunningTenant) =>
      t.kube.call("GET", `/api/v1/namespaces/default/pods/${t.cluster.podName}/log?container=${CONTAINER}`);
    const hold = (t: RunningTenant) =>
      t.kube.stream("GET", `/api/v1/namespaces/default/pods/${t.cluster.podName}:${POD_PORT}/proxy/hold`);
    const other = (t: RunningTenant) => tenants.find((o) => o !== t)!;

    /**
     * Runs `fn` against `t`'s kube-apiserver, then checks that the gateway counted as many dials
     * as `t`'s node accepted connections (at least one), each from `t`'s agent process, and that
     * the other tenant's node accepted none.
     */
    async function carriedBy<T>(t: RunningTenant, fn: () => Promise<T>): Promise<T> {
      const o = other(t);
      const dialsBefore = await gateway.dials();
      const mark = connMark(t.node);
      const otherMark = connMark(o.node);
      const result = await fn();
      let dials = 0;
      let conns: ConnRecord[] = [];
      await waitUntil(
        async () => {
          dials = (await gateway.dials()) - dialsBefore;
          conns = connRecordsSince(t.node, mark);
          return conns.length === dials && dials >= 1;
        },
        ERROR_WITHIN_MS,
        () => `dials counted: ${dials}; ${t.cluster.id}'s node accepted: ${JSON.stringify(conns)}`,
      );
      const pid = agentOf(t).child.pid;
      const otherPid = agentOf(o).child.pid;
      if (VERBOSE) console.log(`${t.cluster.id}: ${dials} dials, agent pid ${pid}: ${JSON.stringify(conns)}`);
      for (const c of conns) {
        expect(
          c.pid,
          `${c.server} connection from ${c.peer} (${c.comm}) is not ${t.cluster.id}'s agent's (pid ${pid}; ${o.cluster.id}'s: ${otherPid})`,
        ).toBe(pid);
      }
      expect(connRecordsSince(o.node, otherMark), `${o.cluster.id}'s node was reached`).toEqual([]);
      return result;
    }

    it("each kube-apiserver runs with its bundle's egress configuration: HTTPConnect over TCP+mTLS to the gateway, files in the bundle's own directory", () => {
      for (const t of tenants) {
        const { dir, files } = t.created.bundle;
        expect(t.apiserver.child.spawnargs).toContain(`--egress-selector-config-file=${files.egressTcp}`);
        const yaml = fs.readFileSync(files.egressTcp, "utf8");
        expect(yaml).toContain(`url: https://${TENANT_GATEWAY_ADDRESS}\n`);
        expect(yaml).toContain(`caBundle: ${dir}/ca.crt\n`);
        expect(yaml).toContain(`clientCert: ${dir}/client.crt\n`);
        expect(yaml).toContain(`clientKey: ${dir}/client.key\n`);
      }
    });

    it.each(TENANT_CLUSTERS.map((c, i) => [c.id, i] as const))(
      "%s: node proxy and pod logs reach its own node through its own agent only",
      async (_id, i) => {
        const t = tenants[i]!;
        const health = await carriedBy(t, () => nodeProxy(t));
        expect([health.status, health.text]).toEqual([200, "ok"]);
        const logs = await carriedBy(t, () => podLogs(t));
        expect([logs.status, logs.text]).toEqual([200, LOG_TEXT]);
      },
    );

    it(`acme's agent gone: acme gets 503 at once, globex (upstream proxy-agent ${ANP_VERSION}) goes on; acme is back with a new agent`, async () => {
      await agentOf(acme()).stop();
      await waitForAgents(1);
      const t0 = Date.now();
      const marks = tenants.map((t) => connMark(t.node));
      const res = await nodeProxy(acme());
      const ms = Date.now() - t0;
      if (VERBOSE) console.log(`acme without agent: ${res.status} after ${ms} ms: ${res.text}`);
      // The gateway's own 503 (no agent of the tenant), passed on by kube-apiserver.
      expect([res.status, /code 503: 503 Service Unavailable/.test(res.text)], res.text).toEqual([503, true]);
      expect(ms, "answered after (ms)").toBeLessThan(ERROR_WITHIN_MS);
      expect(
        tenants.map((t, i) => connRecordsSince(t.node, marks[i])),
        "no node may be reached for acme",
      ).toEqual([[], []]);
      expect((await carriedBy(globex(), () => nodeProxy(globex()))).status).toBe(200);

      startAgent(acme());
      await waitForAgents(2);
      expect((await carriedBy(acme(), () => nodeProxy(acme()))).status).toBe(200);
    });

    it("acme's caller certificate revoked (kgw tenant revoke): acme's open stream is cut and its calls refused from the gateway's next read of the store; globex goes on", async () => {
      const podMark = connMark(globex().node);
      const held = await Promise.all(tenants.map(hold));
      expect(held.map((r) => r.statusCode)).toEqual([200, 200]);
      const ends = held.map(drain);
      let globexEnded = false;
      void ends[1]!.then(() => {
        globexEnded = true;
      });
      let globexPeer = "";
      await waitUntil(() => {
        globexPeer = connRecordsSince(globex().node, podMark)[0]?.peer ?? "";
        return globexPeer !== "";
      }, ERROR_WITHIN_MS);
      const revokedBefore = await revokedCallers();

      await cli.revoke("acme", acme().created.bundle.serial);
      const t0 = Date.now();
      // The open stream must be cut, and new calls refused (from the gateway's next read of the
      // store): poll both, each call a new CONNECT with the revoked certificate.
      let cut: { complete: boolean; error?: string; ms: number } | undefined;
      void ends[0]!.then((r) => {
        cut = { ...r, ms: Date.now() - t0 };
      });
      let refused: KubeResponse | undefined;
      await Promise.all([
        waitUntil(
          () => cut !== undefined,
          ERROR_WITHIN_MS,
          () => "acme's open stream is still open",
        ),
        waitUntil(async () => {
          const res = await nodeProxy(acme());
          if (res.status !== 200) refused = res;
          return refused !== undefined;
        }, ERROR_WITHIN_MS),
      ]);
      const refusedMs = Date.now() - t0;
      if (VERBOSE)
        console.log(
          `acme revoked: open stream cut after ${cut!.ms} ms, a call refused after ${refusedMs} ms: ${refused!.status} ${refused!.text}`,
        );
      expect(cut!.complete, `acme's stream looked complete: ${JSON.stringify(cut)}`).toBe(false);
      expect(refused!.status, refused!.text).toBe(503);
      expect(await revokedCallers()).toBeGreaterThan(revokedBefore);

      // From then on every call of acme's is refused before it reaches any node.
      const marks = tenants.map((t) => connMark(t.node));
      const after = [await nodeProxy(acme()), await podLogs(acme())];
      if (VERBOSE)
        console.log(`acme revoked, then: ${after.map((r) => `${r.status} ${r.text}`).join(" / ")}`);
      // kube-apiserver passes the gateway's refusal on: 503 for the node proxy, 500 for the logs.
      expect(after.map((r) => [r.status, /code 401: 401 Unauthorized/.test(r.text)])).toEqual([
        [503, true],
        [500, true],
      ]);
      expect(tenants.map((t, i) => connRecordsSince(t.node, marks[i]))).toEqual([[], []]);

      // globex: its stream still open, its calls still carried by its own agent.
      expect(globexEnded, "globex's open stream ended").toBe(false);
      expect(closedPeers(globex().node).has(globexPeer), "globex's pod connection closed").toBe(false);
      expect((await carriedBy(globex(), () => nodeProxy(globex()))).status).toBe(200);
      held[1]!.destroy();
    });

    it(`globex's egress policy narrowed to its kubelet (upstream proxy-agent ${ANP_VERSION}): the kubelet is reached, its pod refused by the gateway before any agent dials; back to the default, the pod answers again`, async () => {
      const g = globex();
      const refusals = async () => {
        const res = await nsGet(ctx.bridgeDir, gateway.adminPort, "/metrics");
        return promValue(res.body, "kgw_server_egress_refusals_total", { rule: "no_rule" });
      };
      const before = await refusals();
      await cli.policy("globex", [`${g.cluster.nodeIp}/32:${KUBELET_PORT}`]);
      // From the gateway's next read of the store: poll until the pod is refused.
      let refused: KubeResponse | undefined;
      await waitUntil(async () => {
        const res = await g.kube.call(
          "GET",
          `/api/v1/namespaces/default/pods/${g.cluster.podName}:${POD_PORT}/proxy/hello`,
        );
        if (res.status !== 200) refused = res;
        return refused !== undefined;
      }, ERROR_WITHIN_MS);
      if (VERBOSE) console.log(`globex's pod under a narrow policy: ${refused!.status} ${refused!.text}`);
      // The gateway's 403 (destination not allowed), passed on by kube-apiserver.
      expect(/code 403: 403 Forbidden/.test(refused!.text), refused!.text).toBe(true);
      expect(await refusals()).toBeGreaterThan(before);
      // Refused before forwarding: once the policy is in force, no pod connection is made.
      const mark = connMark(g.node);
      const again = await g.kube.call(
        "GET",
        `/api/v1/namespaces/default/pods/${g.cluster.podName}:${POD_PORT}/proxy/hello`,
      );
      expect(/code 403: 403 Forbidden/.test(again.text), again.text).toBe(true);
      expect(connRecordsSince(g.node, mark)).toEqual([]);
      // The kubelet (node proxy, logs) is inside the policy and still reached, by globex's agent.
      expect((await carriedBy(g, () => nodeProxy(g))).status).toBe(200);
      expect((await carriedBy(g, () => podLogs(g))).status).toBe(200);

      await cli.policy("globex", "default");
      await waitUntil(async () => {
        const res = await g.kube.call(
          "GET",
          `/api/v1/namespaces/default/pods/${g.cluster.podName}:${POD_PORT}/proxy/hello`,
        );
        return res.status === 200;
      }, ERROR_WITHIN_MS);
    });

    async function revokedCallers(): Promise<number> {
      const res = await nsGet(ctx.bridgeDir, gateway.adminPort, "/metrics");
      return promValue(res.body, "kgw_server_revoked_streams_total", { role: "caller" });
    }
  });
}

/** Reads a response to its end; `complete` is false when it was cut off. */
function drain(res: IncomingMessage): Promise<{ bytes: number; complete: boolean; error?: string }> {
  return new Promise((resolve) => {
    let bytes = 0;
    res.on("data", (c: Buffer) => {
      bytes += c.length;
    });
    res.on("end", () => resolve({ bytes, complete: res.complete }));
    res.on("error", (err) => resolve({ bytes, complete: false, error: err.message }));
    res.on("aborted", () => resolve({ bytes, complete: false, error: "aborted" }));
  });
}
