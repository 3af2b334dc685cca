/**
 * A real kube-apiserver (with etcd) reaching a fake kubelet and a fake pod through Konnectivity,
 * end to end, with real Kubernetes API calls: node proxy, pod logs, pod proxy, service proxy, exec
 * (WebSocket) and port-forward (SPDY) upgrades, and 32 MiB each way checked by SHA-256; on all
 * three egress transports kube-apiserver accepts (HTTPConnect over TCP+mTLS, GRPC and HTTPConnect
 * over the Unix socket); for our server with our agent, our server with upstream's proxy-agent,
 * and upstream's proxy-server with our agent; with the agent killed and back.
 *
 * Every process runs in a private network namespace whose only interface is its own loopback
 * (netns.ts, topology.ts). Every backend connection is checked to belong to the agent process, and
 * to be one of the dials the server counted on its admin port. Runs only as root with Go, `ip` and
 * etcd (see vitest.config.ts); test/kube/README.md has the details.
 */
import fs from "node:fs";
import type { IncomingMessage } from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { patternStream, sha256Of } from "../helpers/backends.js";
import { type Proc, stopAll, waitUntil } from "../interop/harness.js";
import {
  ANP_VERSION,
  type Binaries,
  buildBinaries,
  KONNECTIVITY_CLIENT_IN_APISERVER,
  KUBERNETES_VERSION,
} from "./build.js";
import { createClusterObjects } from "./cluster-objects.js";
import {
  createKubePki,
  type EgressSockets,
  egressSockets,
  type KubePki,
  startEtcd,
  startKubeApiserver,
} from "./control-plane.js";
import type { ConnRecord, FakeNodeConfig } from "./fake-node.js";
import { KubeClient } from "./kube-client.js";
import { NetNs } from "./netns.js";
import {
  closedPeers as closedPeersOf,
  connMark as connMarkOf,
  connRecordsSince as connRecordsSinceOf,
} from "./node-log.js";
import {
  agentTokenFile,
  nsGet,
  type ProxyServer,
  startKgwAgent,
  startKgwServer,
  startUpstreamAgent,
  startUpstreamServer,
} from "./servers.js";
import {
  APISERVER_PORTS,
  BRIDGED_PORTS,
  CONTAINER,
  type EgressTransport,
  ETCD_CLIENT_PORT,
  KGW_PORTS,
  KUBELET_PORT,
  LOG_TEXT,
  NAMESPACE_ADDRESSES,
  NODE_IP,
  NODE_NAME,
  POD_IP,
  POD_NAME,
  POD_PORT,
  SERVICE_NAME,
  TRANSPORT_NAMES,
  TRANSPORTS,
  UPSTREAM_SERVER_PORTS,
} from "./topology.js";
import { twoTenants } from "./two-tenants.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BIG = 32 * 1024 * 1024;
/** KGW_KUBE_VERBOSE=1 prints each scenario's backend connections (and their owners) and error answers. */
const VERBOSE = Boolean(process.env.KGW_KUBE_VERBOSE);
/** A killed agent must turn into an error answer this fast (kube-apiserver's own timeouts are far longer). */
const ERROR_WITHIN_MS = 5000;

let bins: Binaries;
let dir: string;
let bridgeDir: string;
let ns: NetNs;
let kp: KubePki;
let sockets: EgressSockets;
let fakeNode: Proc;
let apiservers: Proc[] = [];
const clients = {} as Record<EgressTransport, KubeClient>;
let bigSha: string;

/** Spawns one of this folder's TypeScript programs inside the namespace; resolves once it says `ready`. */
async function startHelper(name: string, file: string, args: string[], ready: string): Promise<Proc> {
  const proc = ns.spawn(name, process.execPath, ["--import", "tsx", path.join(HERE, file), ...args]);
  await waitUntil(
    () => proc.lines.includes(ready),
    30_000,
    () => proc.tail(),
  );
  return proc;
}

beforeAll(async () => {
  // Cold: about 5 minutes for kube-apiserver on 2 cores (much more on a busy machine).
  bins = await buildBinaries();
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "kgw-kube-"));
  bridgeDir = path.join(dir, "bridge");
  fs.mkdirSync(bridgeDir);
  ns = NetNs.create(NAMESPACE_ADDRESSES);
  kp = await createKubePki(dir);
  sockets = egressSockets(dir);
  bigSha = (await sha256Of(patternStream(BIG))).hex;

  const etcd = startEtcd(ns, dir);
  const nodeConfig: FakeNodeConfig = {
    nodeIp: NODE_IP,
    kubeletPort: KUBELET_PORT,
    podIp: POD_IP,
    podPort: POD_PORT,
    podName: POD_NAME,
    kubeletCert: kp.kubeletCert,
    kubeletKey: kp.kubeletKey,
    clientCa: kp.pki.files.caCert,
  };
  [, fakeNode] = await Promise.all([
    startHelper("bridge", "bridge.ts", [bridgeDir, ...BRIDGED_PORTS.map(String)], "bridge ready"),
    startHelper("fake node", "fake-node.ts", [JSON.stringify(nodeConfig)], "fake node ready"),
  ]);
  await waitUntil(
    async () => (await nsGet(bridgeDir, ETCD_CLIENT_PORT, "/health")).status === 200,
    30_000,
    () => etcd.tail(),
  );
  apiservers = TRANSPORTS.map((t) => startKubeApiserver(ns, bins.kubeApiserver, dir, t, kp, sockets));
  for (const t of TRANSPORTS) {
    clients[t] = new KubeClient(t, path.join(bridgeDir, `${APISERVER_PORTS[t]}.sock`), {
      ca: kp.pki.files.caCert,
      cert: kp.adminCert,
      key: kp.adminKey,
    });
  }
  await Promise.all(
    TRANSPORTS.map((t, i) =>
      waitUntil(
        async () => (await clients[t].call("GET", "/readyz", { timeoutMs: 2000 })).status === 200,
        180_000,
        () => `${apiservers[i]!.tail()}\n${etcd.tail()}`,
      ),
    ),
  );
  const kube = clients["grpc-uds"];
  await waitUntil(async () => (await kube.call("GET", "/api/v1/namespaces/default")).status === 200, 30_000);
  await createClusterObjects(kube);
}, 60 * 60_000);

afterAll(async () => {
  // kube-apiservers first, so that they do not spend their last moments looking for etcd.
  await Promise.all(apiservers.map((p) => p.stop()));
  await stopAll();
  // KGW_KUBE_LOG_DIR=<dir> keeps the last lines of every process's output there.
  if (process.env.KGW_KUBE_LOG_DIR) ns?.saveLogs(process.env.KGW_KUBE_LOG_DIR);
  ns?.delete();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
}, 60_000);

// ---------------------------------------------------------------------------------------------
// Accounting: every backend connection belongs to the agent, and is a dial the server counted.

const connMark = (): number => connMarkOf(fakeNode);
const connRecordsSince = (mark: number): ConnRecord[] => connRecordsSinceOf(fakeNode, mark);
const closedPeers = (): Set<string> => closedPeersOf(fakeNode);

interface Route {
  server: () => ProxyServer;
  agent: () => Proc;
}

/**
 * Runs `fn`, then checks that the backends accepted exactly as many connections as the server
 * counted successful dials meanwhile (at least `minConns`), each from the agent's process.
 */
async function throughTunnel<T>(route: Route, minConns: number, fn: () => Promise<T>): Promise<T> {
  const server = route.server();
  const dialsBefore = await server.dials();
  const mark = connMark();
  const result = await fn();
  let dials = 0;
  let conns: ConnRecord[] = [];
  await waitUntil(
    async () => {
      dials = (await server.dials()) - dialsBefore;
      conns = connRecordsSince(mark);
      return conns.length === dials && dials >= minConns;
    },
    5000,
    () => `dials counted by ${server.name}: ${dials}; backend connections: ${JSON.stringify(conns)}`,
  );
  const agentPid = route.agent().child.pid;
  if (VERBOSE)
    console.log(
      `${server.name}: ${dials} dials, agent pid ${agentPid}, backend connections ${JSON.stringify(conns)}`,
    );
  for (const c of conns) {
    expect(
      c.pid,
      `${c.server} connection from ${c.peer} (${c.comm}) is not the agent's (pid ${agentPid})`,
    ).toBe(agentPid);
  }
  return result;
}

const podPath = (p: string) => `/api/v1/namespaces/default/pods/${POD_NAME}:${POD_PORT}/proxy${p}`;

/** Reads a response to its end; `error` is set when it was cut off. */
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

/** The API calls, for each transport, through whichever server and agent `route` gives. */
function apiScenarios(route: (t: EgressTransport) => Route): void {
  describe.each(TRANSPORTS.map((t) => [TRANSPORT_NAMES[t], t] as const))("%s", (_name, t) => {
    const kube = () => clients[t];

    it("node proxy: GET /api/v1/nodes/N/proxy/healthz reaches the kubelet (TLS, kubelet client certificate)", async () => {
      const res = await throughTunnel(route(t), 1, () =>
        kube().call("GET", `/api/v1/nodes/${NODE_NAME}/proxy/healthz`),
      );
      expect([res.status, res.text]).toEqual([200, "ok"]);
    });

    it("pod logs: GET …/pods/P/log is served by the kubelet's /containerLogs", async () => {
      const res = await throughTunnel(route(t), 1, () =>
        kube().call("GET", `/api/v1/namespaces/default/pods/${POD_NAME}/log?container=${CONTAINER}`),
      );
      expect([res.status, res.text]).toEqual([200, LOG_TEXT]);
    });

    it("pod proxy and service proxy reach the pod", async () => {
      const res = await throughTunnel(route(t), 2, async () => [
        await kube().call("GET", podPath("/hello")),
        await kube().call("GET", `/api/v1/namespaces/default/services/${SERVICE_NAME}:http/proxy/hello`),
      ]);
      expect(res.map((r) => [r.status, r.text])).toEqual([
        [200, `hello from ${POD_NAME}`],
        [200, `hello from ${POD_NAME}`],
      ]);
    });

    it("exec: a WebSocket (v5.channel.k8s.io) upgraded to 101 carries 1 MiB of stdin to `cat` and back", async () => {
      const input = Buffer.from(Array.from({ length: 1024 * 1024 }, (_, i) => (i * 7 + 3) & 0xff));
      const out = await throughTunnel(route(t), 1, () =>
        kube().execCat(
          `/api/v1/namespaces/default/pods/${POD_NAME}/exec?command=cat&stdin=true&stdout=true&container=${CONTAINER}`,
          input,
        ),
      );
      expect(out.stdout.equals(input), `stdout: ${out.stdout.length} bytes`).toBe(true);
      expect(out.status).toEqual({ metadata: {}, status: "Success" });
    });

    it("port-forward: an SPDY upgrade (101) carries bytes both ways", async () => {
      const input = Buffer.alloc(256 * 1024, 0x5a);
      const echoed = await throughTunnel(route(t), 1, () =>
        kube().portForwardEcho(`/api/v1/namespaces/default/pods/${POD_NAME}/portforward`, input),
      );
      expect(echoed.equals(input)).toBe(true);
    });

    it("32 concurrent pod proxy requests, each its own dial", async () => {
      const res = await throughTunnel(route(t), 32, () =>
        Promise.all(Array.from({ length: 32 }, () => kube().call("GET", podPath("/hello")))),
      );
      expect(new Set(res.map((r) => `${r.status} ${r.text}`))).toEqual(
        new Set([`200 hello from ${POD_NAME}`]),
      );
    });

    it("the caller hangs up mid-stream: the pod's connection closes too", async () => {
      await throughTunnel(route(t), 1, async () => {
        const mark = connMark();
        const res = await kube().stream("GET", podPath("/hold"));
        await new Promise((r) => res.once("data", r));
        let peer = "";
        await waitUntil(() => {
          peer = connRecordsSince(mark)[0]?.peer ?? "";
          return peer !== "";
        }, 5000);
        res.destroy();
        await waitUntil(
          () => closedPeers().has(peer),
          ERROR_WITHIN_MS,
          () => `the pod's connection from ${peer} is still open`,
        );
      });
    });

    it("32 MiB download and 32 MiB upload through the pod proxy, checked by SHA-256", async () => {
      const [down, up] = await throughTunnel(route(t), 2, async () => {
        const res = await kube().stream("GET", podPath(`/bytes?n=${BIG}`), { timeoutMs: 120_000 });
        const got = { status: res.statusCode, ...(await sha256Of(res)) };
        const sent = await kube().call("POST", podPath("/sha256"), {
          body: patternStream(BIG),
          headers: { "content-type": "application/octet-stream", "content-length": String(BIG) },
          timeoutMs: 120_000,
        });
        return [got, sent] as const;
      });
      expect(down).toEqual({ status: 200, hex: bigSha, bytes: BIG });
      expect([up.status, up.json]).toEqual([200, { sha256: bigSha, bytes: BIG }]);
    });
  });
}

/**
 * The agent killed (SIGKILL: no DRAIN, no goodbye) under one open pod-proxy stream per transport:
 * each stream ends cut off, and new calls get an error from kube-apiserver at once, not a hang.
 */
async function agentKilled(kill: () => Promise<void>): Promise<void> {
  const held = await Promise.all(TRANSPORTS.map((t) => clients[t].stream("GET", podPath("/hold"))));
  expect(held.map((r) => r.statusCode)).toEqual(TRANSPORTS.map(() => 200));
  const ends = held.map(drain);
  const t0 = Date.now();
  await kill();
  const results = await Promise.all(ends);
  const ms = Date.now() - t0;
  if (VERBOSE) console.log(`open streams ended ${ms} ms after the kill: ${JSON.stringify(results)}`);
  for (const r of results)
    expect(r.complete, `a cut-off stream looked complete: ${JSON.stringify(r)}`).toBe(false);
  expect(ms, "open streams ended after (ms)").toBeLessThan(ERROR_WITHIN_MS);

  await Promise.all(
    TRANSPORTS.map(async (t) => {
      const t1 = Date.now();
      const res = await clients[t].call("GET", `/api/v1/nodes/${NODE_NAME}/proxy/healthz`, {
        timeoutMs: ERROR_WITHIN_MS * 4,
      });
      const answeredMs = Date.now() - t1;
      if (VERBOSE) console.log(`${t} without agent: ${res.status} after ${answeredMs} ms: ${res.text}`);
      expect(res.status, `${t}: ${res.text}`).toBe(503);
      expect(answeredMs, `${t}: answered after (ms)`).toBeLessThan(ERROR_WITHIN_MS);
    }),
  );
}

/** After a new agent connected: calls work again on every transport, carried by the new agent. */
async function agentBack(route: (t: EgressTransport) => Route): Promise<void> {
  for (const t of TRANSPORTS) {
    const res = await throughTunnel(route(t), 1, () =>
      clients[t].call("GET", `/api/v1/nodes/${NODE_NAME}/proxy/healthz`),
    );
    expect([t, res.status, res.text]).toEqual([t, 200, "ok"]);
  }
}

async function waitForAgents(server: ProxyServer, n: number, agent?: Proc): Promise<void> {
  await waitUntil(
    async () => (await server.agents()) === n,
    20_000,
    () => `${agent?.tail() ?? ""}\n${server.proc.tail()}`,
  );
}

/** The API calls, the kill and the return, with one agent at a time on our gateway: ours or upstream's. */
function agentPair(name: string, getGateway: () => ProxyServer, start: (generation: number) => Proc): void {
  describe(name, () => {
    let agent: Proc;
    let generation = 0;
    const startAgent = async () => {
      await waitForAgents(getGateway(), 0);
      agent = start(++generation);
      await waitForAgents(getGateway(), 1, agent);
    };
    beforeAll(startAgent, 60_000);
    afterAll(async () => {
      await agent?.stop();
    }, 30_000);

    const route = () => ({ server: getGateway, agent: () => agent });
    apiScenarios(route);

    it("agent killed: open streams end cut off, new calls get 503 at once, on every transport", async () => {
      await agentKilled(async () => {
        agent.signal("SIGKILL");
        await agent.exited;
      });
    });

    it("agent back: a new agent connects, and calls work again on every transport", async () => {
      await startAgent();
      await agentBack(route);
    });
  });
}

// ---------------------------------------------------------------------------------------------

describe(`kube-apiserver ${KUBERNETES_VERSION} (konnectivity-client ${KONNECTIVITY_CLIENT_IN_APISERVER}) → our server`, () => {
  let gateway: ProxyServer;
  let tokenFile: string;

  beforeAll(async () => {
    gateway = await startKgwServer(ns, bridgeDir, kp.pki, sockets, dir);
    tokenFile = agentTokenFile(dir);
  }, 60_000);

  afterAll(async () => {
    await gateway?.stop();
  }, 30_000);

  agentPair(
    "→ our agent",
    () => gateway,
    (g) => startKgwAgent(ns, kp.pki, KGW_PORTS.agent, `kgw-agent-${g}`, { tokenFile }, 0),
  );

  agentPair(
    `→ upstream proxy-agent ${ANP_VERSION}`,
    () => gateway,
    (g) => startUpstreamAgent(ns, bins.upstreamAgent, kp.pki, KGW_PORTS.agent, `upstream-agent-${g}`, 0),
  );
});

describe(`kube-apiserver ${KUBERNETES_VERSION} → upstream proxy-server ${ANP_VERSION} (one per transport) → our agent`, () => {
  const servers = {} as Record<EgressTransport, ProxyServer>;
  const agents = {} as Record<EgressTransport, Proc>;
  let generation = 0;

  /** Our agent authenticates to upstream's server with a client certificate (no TokenReview here). */
  const startAgents = async () => {
    generation++;
    await Promise.all(
      TRANSPORTS.map(async (t, slot) => {
        agents[t] = startKgwAgent(
          ns,
          kp.pki,
          UPSTREAM_SERVER_PORTS[t].agent,
          `kgw-agent-${t}-${generation}`,
          { cert: { cert: kp.pki.files.agentCert, key: kp.pki.files.agentKey } },
          slot,
        );
        await waitForAgents(servers[t], 1, agents[t]);
      }),
    );
  };

  beforeAll(async () => {
    for (const t of TRANSPORTS) {
      servers[t] = await startUpstreamServer(ns, bins.upstreamServer, bridgeDir, kp.pki, sockets, t);
    }
    await startAgents();
  }, 90_000);

  afterAll(async () => {
    await Promise.all(TRANSPORTS.map((t) => agents[t]?.stop()));
    await Promise.all(TRANSPORTS.map((t) => servers[t]?.stop()));
  }, 30_000);

  const route = (t: EgressTransport) => ({ server: () => servers[t], agent: () => agents[t] });
  apiScenarios(route);

  it("agent killed: open streams end cut off, new calls get 503 at once, on every transport", async () => {
    await agentKilled(async () => {
      for (const t of TRANSPORTS) agents[t].signal("SIGKILL");
      await Promise.all(TRANSPORTS.map((t) => agents[t].exited));
    });
  });

  it("agent back: new agents connect, and calls work again on every transport", async () => {
    await startAgents();
    await agentBack(route);
  });
});

twoTenants(() => ({ ns, bins, kp, dir, bridgeDir, startHelper }));
