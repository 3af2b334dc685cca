/**
 * A broken tunnel must never read as a complete one (issue 22, item 1). Callers download an
 * endless body (only the transport can tell a cut-off from the end), some of them behind on
 * reading when the tunnel breaks, which is when a bare TCP reset was read as a clean EOF
 * (lib/transport/break-socket.ts). Each way a tunnel breaks, for both frontends:
 *
 * - the owner killed (kill -9, a real process) under forwarded transfers, a few rounds of the
 *   stress loop (test/helpers/owner-kill-loop.ts; scripts/owner-kill-loop.ts runs hundreds);
 * - the peer link lost under forwarded tunnels (the forwarding instance closes its links);
 * - the agent gone (kill -9 of a real `kgw agent`) under tunnels entering at the owner and
 *   forwarded to it.
 *
 * CONNECT callers must read an error after the last byte they were sent, gRPC callers CLOSE_RSP
 * with an error (ERR_CONNECTION_BROKEN in our client). Ends with a leak check.
 */
import { credentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import type { PeerInstance, PeerLinks } from "../../lib/fleet/peer/peer-links.js";
import { waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { connectThrough } from "../helpers/connect-client.js";
import { AGENT_TOKEN, gatewayFlags } from "../helpers/gateway.js";
import { type KgwProcess, spawnKgw } from "../helpers/kgw-process.js";
import { type Caller, cleanEnds, runOwnerKillLoop, summarize, watch } from "../helpers/owner-kill-loop.js";
import {
  type FleetGateway,
  forwardEverything,
  getPeerPki,
  type PeerPki,
  peerFlags,
  startFleetGateway,
  testPeerLinks,
} from "../helpers/peer.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

/** Bytes each caller must have before the break: its download is under way. */
const FLOWING_BYTES = 256 * 1024;
const ENDLESS = "GET /stream?n=1000000000000 HTTP/1.0\r\n\r\n";
/** How long a caller may take to see its tunnel end once the gateway has broken it. */
const END_WAIT_MS = 15_000;

let pki: TestPki;
let peerPki: PeerPki;
let backend: HttpBackend;
let baseline: Map<string, number>;

beforeAll(async () => {
  pki = await getTestPki();
  peerPki = await getPeerPki(pki);
  baseline = resources();
  backend = await startHttpBackend();
});

afterAll(async () => {
  await backend.close();
  await expectNoLeakedResources(baseline);
}, 30_000);

describe("a tenant's owner killed under forwarded transfers", () => {
  it("ends every CONNECT transfer with an error and every gRPC one with a broken close", async () => {
    const result = await runOwnerKillLoop({ kills: 3, connectCallers: 6, pausedCallers: 3, grpcCallers: 2 });
    const summary = summarize(result.transfers);
    expect(result.kills).toBe(3);
    expect(result.transfers).toHaveLength(3 * 8);
    // The defect: a broken tunnel read as a complete one.
    expect(cleanEnds(result.transfers), summary.join("\n")).toEqual([]);
    expect(
      result.transfers.filter((t) => t.how === "hung"),
      summary.join("\n"),
    ).toEqual([]);
    for (const t of result.transfers.filter((t) => t.frontend === "grpc")) {
      expect(t.code).toBe("ERR_CONNECTION_BROKEN");
    }
  }, 120_000);
});

/**
 * An owner and a forwarding instance in this process, the owner's agent a real `kgw agent`
 * process (so that it can be killed), and callers at either instance.
 */
describe("a peer link lost, an agent gone", () => {
  let owner: FleetGateway;
  let forwarder: FleetGateway;
  let links: PeerLinks;
  let agent: KgwProcess | undefined;
  let grpcAtForwarder: TunnelClient;
  let grpcAtOwner: TunnelClient;

  const grpcClient = (gw: FleetGateway) =>
    new TunnelClient(
      `127.0.0.1:${gw.gw.addresses.frontend!.port}`,
      credentials.createSsl(
        Buffer.from(pki.ca.certPem),
        Buffer.from(pki.frontend.keyPem),
        Buffer.from(pki.frontend.certPem),
      ),
      { "grpc.ssl_target_name_override": "localhost" },
    );

  beforeAll(async () => {
    owner = await startFleetGateway([
      ...gatewayFlags(pki),
      ...peerFlags(pki, peerPki),
      "--server-id=gw-owner",
    ]);
    const ownerInstance: PeerInstance = owner.instance!;
    forwarder = await startFleetGateway([...gatewayFlags(pki), "--server-id=gw-forwarder"], {
      directory: forwardEverything(
        () => links,
        () => ownerInstance,
      ),
    });
    grpcAtForwarder = grpcClient(forwarder);
    grpcAtOwner = grpcClient(owner);
  });

  afterAll(async () => {
    grpcAtForwarder?.close();
    grpcAtOwner?.close();
    if (agent) {
      agent.child.kill("SIGKILL");
      await agent.exited;
    }
    await links?.close();
    await forwarder?.gw.close();
    await owner?.gw.close();
  });

  /** A real agent process connected to the owner. */
  async function startAgentProcess(): Promise<KgwProcess> {
    const proc = spawnKgw([
      "agent",
      "--proxy-server-host=127.0.0.1",
      `--proxy-server-port=${owner.gw.addresses.agent.port}`,
      "--server-name=localhost",
      `--ca-cert=${pki.files.caCert}`,
      `--agent-token=${AGENT_TOKEN}`,
      "--health-server-port=0",
      "--admin-server-port=0",
    ]);
    await waitFor(() => owner.gw.registry.size === 1, 30_000, "the agent connected").catch((err: Error) => {
      throw new Error(`${err.message}: ${proc.output.join("").slice(-2000)}`);
    });
    return proc;
  }

  /** `connect` CONNECT callers (`paused` of them stop reading) and `grpc` gRPC callers at `gw`. */
  async function downloads(
    gw: FleetGateway,
    grpc: TunnelClient,
    connect: number,
    paused: number,
    grpcCount: number,
  ) {
    const callers: Caller[] = [];
    for (let i = 0; i < connect; i++) {
      const c = await connectThrough(
        { kind: "tls", host: "127.0.0.1", port: gw.gw.addresses.frontend!.port, pki },
        backend.address,
      );
      expect(c.status).toBe(200);
      callers.push(watch(c.socket, "connect", i < paused));
    }
    for (let i = 0; i < grpcCount; i++) callers.push(watch(await grpc.dial(backend.address), "grpc", false));
    for (const c of callers) c.stream.write(ENDLESS);
    await waitFor(() => callers.every((c) => c.bytes() >= FLOWING_BYTES), 20_000, "every download flowing");
    for (const c of callers) if (c.paused) c.stream.pause();
    return callers;
  }

  /** Once `gw` has ended every CONNECT tunnel, the paused callers read again; how each ended. */
  async function ends(gws: FleetGateway[], callers: Caller[]) {
    for (const gw of gws) {
      await waitFor(
        async () => (await gw.gw.metrics.httpConnections.get()).values[0]?.value === 0,
        END_WAIT_MS,
        `${gw.instance?.id ?? "forwarder"} ended every CONNECT tunnel`,
      );
    }
    for (const c of callers) if (c.paused) c.stream.resume();
    const out = await Promise.all(
      callers.map(async (c) => ({ frontend: c.frontend, paused: c.paused, ...(await c.ended(END_WAIT_MS)) })),
    );
    for (const c of callers) c.stream.destroy();
    return out.map(({ at: _at, ...rest }) => rest);
  }

  it("breaks forwarded tunnels whose peer link is lost: an error for every caller", async () => {
    agent = await startAgentProcess();
    links = testPeerLinks(pki, peerPki, { log: forwarder.log, metrics: forwarder.gw.metrics });
    const callers = await downloads(forwarder, grpcAtForwarder, 4, 2, 2);
    await links.close(); // this instance loses its links: every tunnel on them breaks
    const got = await ends([forwarder], callers);
    expect(got.filter((e) => e.how !== "error")).toEqual([]);
    expect(got.filter((e) => e.frontend === "grpc").map((e) => e.code)).toEqual([
      "ERR_CONNECTION_BROKEN",
      "ERR_CONNECTION_BROKEN",
    ]);
    const broken = await forwarder.gw.metrics.brokenConnectTunnels.get();
    expect(broken.values.find((v) => v.labels.end === "signalled")?.value).toBe(4);
  }, 60_000);

  it("breaks tunnels whose agent is gone, at the owner and across the hop: an error for every caller", async () => {
    links = testPeerLinks(pki, peerPki, { log: forwarder.log, metrics: forwarder.gw.metrics });
    const atOwner = await downloads(owner, grpcAtOwner, 3, 2, 1);
    const hopped = await downloads(forwarder, grpcAtForwarder, 3, 2, 1);
    agent!.child.kill("SIGKILL");
    await agent!.exited;
    agent = undefined;
    const got = await ends([owner, forwarder], [...atOwner, ...hopped]);
    expect(got.filter((e) => e.how !== "error")).toEqual([]);
    expect(got.filter((e) => e.frontend === "grpc").map((e) => e.code)).toEqual([
      "ERR_CONNECTION_BROKEN",
      "ERR_CONNECTION_BROKEN",
    ]);
  }, 60_000);
});
