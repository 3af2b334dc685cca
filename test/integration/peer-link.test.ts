/**
 * Peer links between two gateways of one fleet, in tenant mode: the owner (B) holds the agents
 * and a peer port; the forwarding instance (A) has no agents, and its agent directory sends every
 * dial to B through PeerLinks, as routing will once it has chosen an owner. Callers use A's one
 * port with their tenant's bundle certificate. Each tenant's agent reaches a backend of its own
 * at the same address (two clusters with the same service IP), so what a caller reads says whose
 * agent served it; B's egress policy, quotas and audit apply to forwarded dials; a stalled reader
 * holds back only its own tunnel on the shared peer connection. Ends with a leak check.
 */
import { readFileSync } from "node:fs";
import { createServer, connect as netConnect, type Server, type Socket } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { credentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import type { SocketFactory } from "../../lib/agent/dial-target.js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import { PeerNotHereError, PeerUnavailableError } from "../../lib/errors.js";
import type { PeerInstance, PeerLinks } from "../../lib/fleet/peer/peer-links.js";
import type { DialContext } from "../../lib/server/core/dial-context.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import {
  closedPort,
  type HttpBackend,
  hangingListener,
  patternStream,
  sha256Of,
  startHttpBackend,
} from "../helpers/backends.js";
import { bodyText, httpOver } from "../helpers/connect-client.js";
import { tenantGatewayFlags } from "../helpers/gateway.js";
import { connectOnGatewayPort } from "../helpers/gateway-connect.js";
import {
  type FleetGateway,
  forwardEverything,
  getPeerPki,
  type PeerPki,
  peerFlags,
  startFleetGateway,
  testPeerLinks,
} from "../helpers/peer.js";
import { recordingEnd } from "../helpers/peer-frontend.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

const MIB = 1024 * 1024;
const BIG = 64 * MIB;

let pki: TestPki;
let peerPki: PeerPki;
let store: TestTenantStore;
let a: FleetGateway;
let b: FleetGateway;
let links: PeerLinks;
let backend: HttpBackend;
let baseline: Map<string, number>;
const tenants: Record<string, CreatedTenant> = {};
const agents: RunningAgent[] = [];
/** Which tenant's agent opened each backend connection, in order. */
const dialsBy: string[] = [];
/** Per tenant, the backend its agent reaches at WHO's address. */
const who: Record<string, WhoBackend> = {};
let whoAddress: string;
let firehose: Firehose;
/** MB/s of the unhindered 64 MiB download, for the stalled-reader comparison. */
let downloadMBps = 0;

/** Handles and requests alive in this process, by kind, for the leak check. */
interface WhoBackend {
  port: number;
  close(): Promise<void>;
}

/** Answers every connection with `name` and closes it. */
async function startWho(name: string): Promise<WhoBackend> {
  const open = new Set<Socket>();
  const server: Server = createServer((s) => {
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    s.end(name);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    close: () =>
      new Promise((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

interface Firehose {
  port: number;
  /** Bytes the backend has handed to its socket on its latest connection. */
  written(): number;
  /** Milliseconds since that count last grew. */
  stalledFor(): number;
  close(): Promise<void>;
}

/** Writes as fast as the connection takes it, forever; counts what the connection accepted. */
async function startFirehose(): Promise<Firehose> {
  const open = new Set<Socket>();
  let written = 0;
  let grewAt = Date.now();
  const chunk = Buffer.alloc(64 * 1024, 0x5a);
  const server: Server = createServer((s) => {
    open.add(s);
    written = 0;
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    const pump = () => {
      while (!s.destroyed) {
        written += chunk.length;
        grewAt = Date.now();
        if (!s.write(chunk)) {
          s.once("drain", pump);
          return;
        }
      }
    };
    pump();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as { port: number }).port,
    written: () => written,
    stalledFor: () => Date.now() - grewAt,
    close: () =>
      new Promise((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

/** The agent's sockets, tagged; WHO's port leads to the tenant's own backend. */
function tenantSockets(tenant: string): SocketFactory {
  return ({ port, addresses }) => {
    dialsBy.push(tenant);
    const target = port === who.acme!.port ? (who[tenant]?.port ?? port) : port;
    return netConnect({ host: addresses[0]?.address ?? "127.0.0.1", port: target });
  };
}

async function startTenantAgent(id: string): Promise<void> {
  const { agent } = await startTestAgent(
    pki,
    b.gw.addresses.agent.port,
    [`--agent-token=${tenants[id]!.agentToken}`, `--agent-id=${id}-agent`],
    { connectSocket: tenantSockets(id) },
  );
  agents.push(agent);
}

function bundleCert(id: string) {
  const files = tenants[id]!.bundleFiles;
  return { certPem: readFileSync(files.clientCert!), keyPem: readFileSync(files.clientKey!) };
}

/** CONNECT on A's one port as tenant `id`'s control plane. */
const connectViaA = (id: string, target: string) =>
  connectOnGatewayPort(pki, a.gw.addresses.agent.port, { cert: bundleCert(id) }, target);

async function readAll(socket: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of socket) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
}

/** A dial context as A's caller authentication would have built it. */
const contextOf = (tenant: string): DialContext => ({
  caller: { tenant, principal: `cert:${tenant}-caller#01`, listener: "gateway" },
  frontend: "connect",
});

const owner = (): PeerInstance => b.instance!;

const counter = async (name: "peerDials" | "peerDialsServed", g: FleetGateway, outcome: string) =>
  (await g.gw.metrics[name].get()).values.find((v) => v.labels.outcome === outcome)?.value ?? 0;

beforeAll(async () => {
  pki = await getTestPki();
  peerPki = await getPeerPki(pki);
  baseline = resources();
  store = makeTenantStore(pki);
  for (const id of ["acme", "globex", "initech", "umbrella"]) tenants[id] = await store.create(id);
  tenants.hooli = await store.create("hooli", { allowLoopback: false });
  await store.run(["quota", "umbrella", "--max-tunnels=1"]);
  backend = await startHttpBackend();
  who.acme = await startWho("acme");
  who.globex = await startWho("globex");
  whoAddress = `127.0.0.1:${who.acme.port}`;
  firehose = await startFirehose();
  b = await startFleetGateway([
    ...tenantGatewayFlags(pki, store.dir),
    ...peerFlags(pki, peerPki),
    "--server-id=gw-owner",
  ]);
  a = await startFleetGateway([...tenantGatewayFlags(pki, store.dir), "--server-id=gw-forwarder"], {
    directory: forwardEverything(() => links, owner),
  });
  links = testPeerLinks(pki, peerPki, { instanceId: "gw-forwarder", log: a.log, metrics: a.gw.metrics });
  for (const id of ["acme", "globex", "hooli", "umbrella"]) await startTenantAgent(id);
  await waitFor(() => b.gw.registry.size === 4, 10_000, "four agents on the owner");
}, 60_000);

afterAll(async () => {
  for (const agent of agents) await agent.stop();
  await links?.close();
  await a?.gw.close();
  await b?.gw.close();
  await backend?.close();
  for (const w of Object.values(who)) await w.close();
  await firehose?.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
}, 30_000);

describe("dials forwarded to the owner", () => {
  it.each(["acme", "globex"])(
    "a CONNECT from %s's control plane at A reaches its own agent at B",
    async (id) => {
      const before = dialsBy.length;
      const r = await connectViaA(id, whoAddress);
      expect(r.status).toBe(200);
      expect(await readAll(r.socket)).toBe(id);
      expect(dialsBy.slice(before)).toEqual([id]);
    },
  );

  it("a gRPC caller at A reaches its tenant's agent at B", async () => {
    const cert = bundleCert("globex");
    const client = new TunnelClient(
      `127.0.0.1:${a.gw.addresses.agent.port}`,
      credentials.createSsl(Buffer.from(pki.ca.certPem), cert.keyPem, cert.certPem),
      { "grpc.ssl_target_name_override": "localhost" },
    );
    try {
      const before = dialsBy.length;
      const socket = await client.dial(whoAddress);
      expect(await readAll(socket as unknown as Socket)).toBe("globex");
      expect(dialsBy.slice(before)).toEqual(["globex"]);
    } finally {
      client.close();
    }
  });

  it("the forwarder writes the dial's one record, naming the owner and its agent; the owner writes none", async () => {
    const marks = { a: a.audit.length, b: b.audit.length };
    const r = await connectViaA("acme", whoAddress);
    expect(await readAll(r.socket)).toBe("acme");
    await waitFor(
      () => a.audit.slice(marks.a).some((rec) => rec.tenant === "acme" && rec.outcome === "ok"),
      5000,
      "A's record",
    );
    const atA = a.audit.slice(marks.a);
    expect(atA).toHaveLength(1);
    expect(atA[0]).toMatchObject({
      tenant: "acme",
      instance: "gw-forwarder",
      owner: "gw-owner",
      agentId: "acme-agent",
      frontend: "connect",
      listener: "gateway",
      destination: whoAddress,
      bytesToCaller: 4,
    });
    expect(atA[0]!.principal).toMatch(/^cert:/);
    expect(atA[0]!.dialId).toMatch(/^[0-9a-f-]{36}$/);
    // B served it (counted as a served peer dial), and audits nothing of it.
    expect(b.audit.slice(marks.b)).toEqual([]);
  });

  it("64 MiB each way through the hop arrive intact (SHA-256)", async () => {
    const expected = await sha256Of(patternStream(BIG));
    const down = await connectViaA("acme", backend.address);
    expect(down.status).toBe(200);
    const started = performance.now();
    const got = await sha256Of(await httpOver(down.socket, `/bytes?n=${BIG}`));
    downloadMBps = BIG / MIB / ((performance.now() - started) / 1000);
    expect(got).toEqual(expected);
    const up = await connectViaA("acme", backend.address);
    const res = await httpOver(up.socket, "/sha256", { method: "POST", body: patternStream(BIG) });
    const answer = JSON.parse(await bodyText(res)) as { sha256: string; bytes: number };
    expect(answer).toEqual({ sha256: expected.hex, bytes: BIG });
  }, 60_000);

  it("a stalled reader holds back only its own tunnel on the shared peer connection", async () => {
    const stalled = await connectViaA("acme", `127.0.0.1:${firehose.port}`);
    expect(stalled.status).toBe(200);
    stalled.socket.pause(); // the caller stops reading
    await waitFor(() => firehose.stalledFor() >= 500, 20_000, "the firehose held back");
    const held = firehose.written();
    // Every window on the way is per tunnel: what one stalled reader holds is bounded.
    expect(held).toBeLessThan(160 * MIB);
    const other = await connectViaA("acme", backend.address);
    const started = performance.now();
    const got = await sha256Of(await httpOver(other.socket, `/bytes?n=${BIG}`));
    const mbps = BIG / MIB / ((performance.now() - started) / 1000);
    expect(got).toEqual(await sha256Of(patternStream(BIG)));
    // Same link, same speed as without the stalled tunnel (loosely: the machine is shared).
    expect(links.connectionCount).toBe(1);
    expect(mbps).toBeGreaterThan(downloadMBps * 0.3);
    expect(firehose.written()).toBe(held);
    stalled.socket.destroy();
  }, 60_000);

  it("the owner's egress policy refuses a forwarded dial, and the refusal keeps its type", async () => {
    const before = dialsBy.length;
    const refusals = (await b.gw.metrics.egressRefusals.get()).values.reduce((n, v) => n + v.value, 0);
    const d = recordingEnd();
    links.dial(owner(), contextOf("hooli"), { protocol: "tcp", address: backend.address }, d.end);
    const { err } = await d.outcome;
    expect(err?.code).toMatch(/^ERR_(FORBIDDEN|DESTINATION_NOT_ALLOWED)$/);
    expect(dialsBy.slice(before)).toEqual([]);
    const after = (await b.gw.metrics.egressRefusals.get()).values.reduce((n, v) => n + v.value, 0);
    expect(after).toBe(refusals + 1);
  });

  it("the owner's quota applies to forwarded dials", async () => {
    const first = recordingEnd();
    links.dial(owner(), contextOf("umbrella"), { protocol: "tcp", address: backend.address }, first.end);
    const { link } = await first.outcome;
    expect(link).toBeDefined();
    const second = recordingEnd();
    links.dial(owner(), contextOf("umbrella"), { protocol: "tcp", address: backend.address }, second.end);
    expect((await second.outcome).err?.code).toBe("ERR_QUOTA");
    link!.close();
    await waitFor(
      () => first.closed() !== undefined || b.gw.activeTunnels === 0,
      5000,
      "first tunnel closed",
    );
  });

  it("the owner without an agent of the tenant answers 'not here'", async () => {
    const d = recordingEnd();
    links.dial(owner(), contextOf("initech"), { protocol: "tcp", address: whoAddress }, d.end);
    const { err } = await d.outcome;
    expect(err).toBeInstanceOf(PeerNotHereError);
    expect(await counter("peerDialsServed", b, "not_here")).toBeGreaterThanOrEqual(1);
    // Through A, the caller sees what one instance without an agent would answer.
    const r = await connectViaA("initech", whoAddress);
    expect(r.status).toBe(503);
    r.socket.destroy();
  });

  it("a dial to an owner that is down fails as PeerUnavailable, and the owner is then avoided", async () => {
    const gone: PeerInstance = { id: "gw-gone", host: "127.0.0.1", port: await closedPort() };
    const d = recordingEnd();
    links.dial(gone, contextOf("acme"), { protocol: "tcp", address: whoAddress }, d.end);
    expect((await d.outcome).err).toBeInstanceOf(PeerUnavailableError);
    expect(links.isHealthy(gone)).toBe(false);
    expect(links.isHealthy(owner())).toBe(true);
    expect(() =>
      links.dial(gone, contextOf("acme"), { protocol: "tcp", address: whoAddress }, d.end),
    ).toThrow(PeerUnavailableError);
  });

  it("a dial cancelled before its answer sends DIAL_CLS: the owner's pending dial ends at once", async () => {
    const hanging = await hangingListener();
    const pending = async () => (await b.gw.metrics.pendingDials.get()).values[0]?.value ?? 0;
    try {
      const cancelledBefore = await counter("peerDialsServed", b, "cancelled");
      const socket = rawConnect("acme", `127.0.0.1:${hanging.port}`);
      await waitFor(async () => (await pending()) === 1, 5000, "dial pending at B");
      // The caller gives up before any answer; B's dial must end long before its 10 s timeout.
      const started = Date.now();
      socket.destroy();
      await waitFor(
        async () => (await counter("peerDialsServed", b, "cancelled")) === cancelledBefore + 1,
        5000,
        "B saw DIAL_CLS",
      );
      await waitFor(async () => (await pending()) === 0, 5000, "no dial pending at B");
      expect(Date.now() - started).toBeLessThan(5000);
      expect(await counter("peerDials", a, "cancelled")).toBeGreaterThanOrEqual(1);
    } finally {
      hanging.close();
    }
  });
});

describe("a peer asking for a tenant's agents", () => {
  it("the owner says how many of the tenant's agents it holds, to fleet peers only", async () => {
    expect(await links.askAgents(owner(), "acme", 2000)).toEqual({ agents: 1 });
    expect(await links.askAgents(owner(), "initech", 2000, "no_live_owner")).toEqual({ agents: 0 });
    // The asker counts each answer by why it asked.
    const asked = (await a.gw.metrics.peerProbes.get()).values.map(
      (v) => `${v.labels.reason} ${v.labels.answer} ${v.value}`,
    );
    expect(asked.sort()).toEqual(["no_live_owner no_agents 1", "registry_unreadable has_agents 1"]);
    // A caller's certificate from the same CA is no peer's: refused, and nothing said.
    const notPeer = testPeerLinks(pki, peerPki, { log: a.log, identity: pki.frontend });
    try {
      expect(await notPeer.askAgents(owner(), "acme", 2000)).toBe("refused");
    } finally {
      await notPeer.close();
    }
    const served = (await b.gw.metrics.peerProbesServed.get()).values;
    expect(served.find((v) => v.labels.outcome === "has_agents")?.value).toBe(1);
    expect(served.find((v) => v.labels.outcome === "no_agents")?.value).toBe(1);
  });
});

describe("a peer asking for the owner's status slice (the fleet's status API)", () => {
  it("the owner sends its live state from memory, all tenants or one, to fleet peers only", async () => {
    const all = await links.askStatus(owner(), undefined, 2000);
    if (!("slice" in all)) throw new Error(`no slice: ${JSON.stringify(all)}`);
    expect(all.slice).toMatchObject({ apiVersion: "kgw.status/v1", instance: "gw-owner", agents: 4 });
    expect(all.slice.tenants.map((t) => t.tenant)).toEqual(
      expect.arrayContaining(["acme", "globex", "hooli", "umbrella"]),
    );
    const one = await links.askStatus(owner(), "acme", 2000);
    if (!("slice" in one)) throw new Error(`no slice: ${JSON.stringify(one)}`);
    expect(one.slice.tenants.map((t) => [t.tenant, t.agents.map((x) => x.instance)])).toEqual([
      ["acme", ["gw-owner"]],
    ]);
    // A tenant that is not an id is refused, not looked up.
    expect(await links.askStatus(owner(), "Not_A-Label", 2000)).toMatchObject({ failure: "refused" });
    // A caller's certificate from the same CA is no peer's: refused, and nothing sent.
    const notPeer = testPeerLinks(pki, peerPki, { log: a.log, identity: pki.frontend });
    try {
      expect(await notPeer.askStatus(owner(), undefined, 2000)).toMatchObject({ failure: "refused" });
    } finally {
      await notPeer.close();
    }
  });
});

/** A CONNECT request on A's port as tenant `id`, on a raw TLS socket the test can drop at will. */
function rawConnect(id: string, target: string): TLSSocket {
  const cert = bundleCert(id);
  const socket = tlsConnect({
    host: "127.0.0.1",
    port: a.gw.addresses.agent.port,
    servername: "localhost",
    ca: pki.ca.certPem,
    cert: cert.certPem,
    key: cert.keyPem,
    ALPNProtocols: ["http/1.1"],
  });
  socket.on("error", () => {});
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
  return socket;
}
