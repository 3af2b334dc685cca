/**
 * Peer links when things go wrong: hostile or broken input on the peer port (no certificate, a
 * caller's certificate from the same CA, another CA, garbage, a handshake that never finishes,
 * missing or malformed context), each refused clearly with nothing dialed while a real peer's
 * tunnel carries on; and an owner killed (SIGKILL, a real process) with tunnels open, which the
 * callers at the forwarding instance must see broken, never cleanly ended. Drop-in mode (tenant
 * "default") on both instances. Ends with a leak check.
 */
import { type ClientHttp2Session, connect as h2Connect } from "node:http2";
import type { Socket } from "node:net";
import { connect as netConnect } from "node:net";
import { type TLSSocket, connect as tlsConnect } from "node:tls";
import { credentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import { PeerUnavailableError } from "../../lib/errors.js";
import { PEER_IDENTITY_URI } from "../../lib/fleet/peer/peer-identity.js";
import type { PeerInstance, PeerLinks } from "../../lib/fleet/peer/peer-links.js";
import { encodePacket } from "../../lib/proto/codec.js";
import { writeMessagePrefix } from "../../lib/proto/grpc-http2.js";
import { dialRequest } from "../../lib/proto/packet.js";
import type { DialContext } from "../../lib/server/core/dial-context.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { closedPort, type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { BROKEN_TUNNEL_ERRORS, connectThrough } from "../helpers/connect-client.js";
import { gatewayFlags } from "../helpers/gateway.js";
import { spawnKgw } from "../helpers/kgw-process.js";
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

const HANDSHAKE_TIMEOUT_MS = 500;

let pki: TestPki;
let peerPki: PeerPki;
let backend: HttpBackend;
let baseline: Map<string, number>;

const context: DialContext = {
  caller: { tenant: "default", principal: "cert:kube-apiserver#01", listener: "tcp" },
  frontend: "grpc",
};

const GOOD_CONTEXT = {
  "kgw-peer-tenant": "default",
  "kgw-peer-principal": "cert%3Akube-apiserver%2301",
  "kgw-peer-frontend": "connect",
  "kgw-peer-listener": "tcp",
  "kgw-peer-origin": "gw-test",
};

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

interface PeerCallResult {
  /** The gRPC status (trailers or trailers-only), when one came. */
  grpcStatus?: number;
  message?: string;
  /** The connection's error, when it never got that far. */
  error?: string;
}

/** One raw peer call with `tls` credentials and `headers`, carrying a DIAL_REQ for `address`. */
function rawPeerCall(
  port: number,
  tls: { cert?: string; key?: string; ca?: string },
  headers: Record<string, string>,
  address: string,
): Promise<PeerCallResult> {
  return new Promise((resolve) => {
    let session: ClientHttp2Session;
    let socket: TLSSocket | undefined;
    const result: PeerCallResult = {};
    const done = () => {
      // TLS 1.3: a refused client certificate is an alert after the client's handshake is done,
      // so the client may only see its connection close.
      if (result.grpcStatus === undefined) result.error ??= "the connection closed without an answer";
      session.destroy();
      // A session refused during its TLS handshake leaves its socket open: ours to close.
      socket?.destroy();
      resolve(result);
    };
    session = h2Connect(`https://127.0.0.1:${port}`, {
      createConnection: () => {
        socket = tlsConnect({
          host: "127.0.0.1",
          port,
          ca: tls.ca ?? pki.ca.certPem,
          ...(tls.cert ? { cert: tls.cert, key: tls.key } : {}),
          ALPNProtocols: ["h2"],
          checkServerIdentity: () => undefined,
        });
        socket.on("error", () => {});
        return socket;
      },
    });
    session.on("error", (err) => {
      result.error ??= err.message;
      done();
    });
    const stream = session.request({
      ":method": "POST",
      ":path": "/ProxyService/Proxy",
      "content-type": "application/grpc",
      te: "trailers",
      ...headers,
    });
    const status = (h: Record<string, unknown>) => {
      if (h["grpc-status"] !== undefined) {
        result.grpcStatus = Number(h["grpc-status"]);
        result.message = decodeURIComponent(String(h["grpc-message"] ?? ""));
      }
    };
    stream.on("response", status);
    stream.on("trailers", status);
    stream.on("data", () => {});
    stream.on("error", (err) => {
      result.error ??= err.message;
    });
    stream.on("close", done);
    const body = encodePacket(dialRequest(address, 1n));
    const msg = Buffer.alloc(5 + body.length);
    writeMessagePrefix(msg, body.length);
    body.copy(msg, 5);
    stream.end(msg);
  });
}

describe("bad input on the peer port", () => {
  let b: FleetGateway;
  let links: PeerLinks;
  let agent: RunningAgent;
  const dials: string[] = [];

  beforeAll(async () => {
    b = await startFleetGateway([
      ...gatewayFlags(pki),
      ...peerFlags(pki, peerPki),
      "--server-id=gw-owner",
      `--tls-handshake-timeout=${HANDSHAKE_TIMEOUT_MS}ms`,
    ]);
    ({ agent } = await startTestAgent(pki, b.gw.addresses.agent.port, [], {
      connectSocket: ({ port, addresses }) => {
        dials.push(`${addresses[0]?.address}:${port}`);
        return netConnect({ host: addresses[0]?.address ?? "127.0.0.1", port });
      },
    }));
    await waitFor(() => b.gw.registry.size === 1, 5000, "agent connected");
    links = testPeerLinks(pki, peerPki, { log: b.log });
  });

  afterAll(async () => {
    await agent?.stop();
    await links?.close();
    await b?.gw.close();
  });

  const served = async () =>
    (await b.gw.metrics.peerDialsServed.get()).values.reduce((n, v) => n + v.value, 0);
  const rejected = async (reason: string) =>
    (await b.gw.metrics.rejectedConnections.get()).values.find(
      (v) => v.labels.listener === "peer" && v.labels.reason === reason,
    )?.value ?? 0;

  it("refuses every kind of bad peer, dials nothing, and a real peer's tunnel carries on", async () => {
    // A real peer's tunnel, open through all of it.
    const live = recordingEnd();
    links.dial(b.instance!, context, { protocol: "tcp", address: backend.address }, live.end);
    const { link } = await live.outcome;
    expect(link).toBeDefined();
    link!.send(Buffer.from("GET /hello HTTP/1.1\r\nHost: b\r\n\r\n"));
    await waitFor(() => live.received().includes("hello from the backend"), 5000, "first answer");
    const dialsBefore = dials.length;
    const servedBefore = await served();

    // No client certificate: the TLS handshake is refused.
    const tlsRefusalsBefore = await rejected("tls");
    const noCert = await rawPeerCall(b.instance!.port, {}, GOOD_CONTEXT, backend.address);
    expect(noCert.grpcStatus).toBeUndefined();
    expect(noCert.error).toBeDefined();

    // A certificate from another CA, even with the peer URI: refused at the handshake.
    const other = await rawPeerCall(
      b.instance!.port,
      { cert: peerPki.otherCaPeer.certPem, key: peerPki.otherCaPeer.keyPem },
      GOOD_CONTEXT,
      backend.address,
    );
    expect(other.grpcStatus).toBeUndefined();
    expect(other.error).toBeDefined();
    await waitFor(async () => (await rejected("tls")) === tlsRefusalsBefore + 2, 5000, "both refused at TLS");

    // Certificates from the same CA without the peer identity: a caller's, and a tenant caller's.
    const tenantCaller = await pki.ca.issue({
      commonName: "acme-caller",
      uris: ["kgw://tenant/acme/caller"],
      usage: "client",
    });
    for (const id of [pki.frontend, tenantCaller]) {
      const r = await rawPeerCall(
        b.instance!.port,
        { cert: id.certPem, key: id.keyPem },
        GOOD_CONTEXT,
        backend.address,
      );
      expect(r.grpcStatus).toBe(16); // UNAUTHENTICATED
      expect(r.message).toContain("not a fleet peer");
      expect(r.message).toContain(PEER_IDENTITY_URI);
    }
    expect(await rejected("not_a_peer")).toBe(2);

    // Missing or malformed context: INVALID_ARGUMENT, naming the header.
    const peerCert = { cert: peerPki.peer.certPem, key: peerPki.peer.keyPem };
    const { "kgw-peer-tenant": _t, ...noTenant } = GOOD_CONTEXT;
    const bad: [Record<string, string>, string][] = [
      [noTenant, "kgw-peer-tenant"],
      [{ ...GOOD_CONTEXT, "kgw-peer-tenant": "Not_A_Tenant" }, "kgw-peer-tenant"],
      [{ ...GOOD_CONTEXT, "kgw-peer-frontend": "ftp" }, "kgw-peer-frontend"],
      [{ ...GOOD_CONTEXT, "kgw-peer-listener": "carrier-pigeon" }, "kgw-peer-listener"],
      [{ ...GOOD_CONTEXT, "kgw-peer-principal": "%ZZ" }, "kgw-peer-principal"],
      [{ ...GOOD_CONTEXT, "kgw-peer-principal": "evil%0Aline" }, "kgw-peer-principal"],
      [{ ...GOOD_CONTEXT, "kgw-peer-origin": "" }, "kgw-peer-origin"],
    ];
    for (const [headers, name] of bad) {
      const r = await rawPeerCall(b.instance!.port, peerCert, headers, backend.address);
      expect(r.grpcStatus, name).toBe(3); // INVALID_ARGUMENT
      expect(r.message).toContain(name);
    }

    // Garbage instead of a ClientHello: closed, counted as a failed handshake.
    const tlsFailuresBefore = await rejected("tls");
    const garbage = netConnect({ host: "127.0.0.1", port: b.instance!.port });
    garbage.on("error", () => {});
    garbage.write(Buffer.from("GET / HTTP/1.1\r\n\r\n\x00\x01\x02 this is not TLS"));
    await new Promise((r) => garbage.once("close", r));
    await waitFor(async () => (await rejected("tls")) > tlsFailuresBefore, 5000, "garbage counted");

    // A handshake that never finishes: closed after the handshake timeout.
    const slow = netConnect({ host: "127.0.0.1", port: b.instance!.port });
    slow.on("error", () => {});
    const openedAt = Date.now();
    await new Promise((r) => slow.once("close", r));
    const heldMs = Date.now() - openedAt;
    expect(heldMs).toBeGreaterThanOrEqual(HANDSHAKE_TIMEOUT_MS - 50);
    expect(heldMs).toBeLessThan(HANDSHAKE_TIMEOUT_MS + 2000);

    // Our own client refuses just as clearly: a link with a certificate from another CA, and a
    // "peer" whose server certificate lacks the peer identity (B's agent port).
    const rogue = testPeerLinks(pki, peerPki, { log: b.log, identity: peerPki.otherCaPeer });
    const impostor: PeerInstance = { id: "gw-impostor", host: "127.0.0.1", port: b.gw.addresses.agent.port };
    for (const [client, target] of [
      [rogue, b.instance!],
      [links, impostor],
    ] as const) {
      const d = recordingEnd();
      client.dial(target, context, { protocol: "tcp", address: backend.address }, d.end);
      const { err } = await d.outcome;
      expect(err).toBeInstanceOf(PeerUnavailableError);
    }
    await rogue.close();

    // Nothing was dialed for any of them; the invalid calls were counted, nothing else served.
    expect(dials.length).toBe(dialsBefore);
    expect(await served()).toBe(servedBefore + bad.length); // outcome "invalid"
    const before = live.received().length;
    link!.send(Buffer.from("GET /hello HTTP/1.1\r\nHost: b\r\n\r\n"));
    await waitFor(() => live.received().length > before, 5000, "the live tunnel still answers");
    expect(live.closed()).toBeUndefined();
    link!.close();
    await waitFor(() => b.gw.activeTunnels === 0, 5000, "tunnel closed at the owner");
  });
});

describe("an owner killed with tunnels open", () => {
  // The CONNECT caller once read a clean end here about one run in ten: the reset reached it
  // behind bytes it had not read, which libuv reports as EOF. test/integration/
  // peer-hop-truncation.test.ts makes that case certain; here, one caller of each frontend.
  it("breaks the callers' tunnels at the forwarding instance (an error, not a clean end)", {
    timeout: 60_000,
  }, async () => {
    const peerPort = await closedPort();
    const owner = spawnKgw([
      "server",
      ...gatewayFlags(pki),
      ...peerFlags(pki, peerPki).filter((f) => !f.startsWith("--peer-port")),
      `--peer-port=${peerPort}`,
      "--server-id=gw-owner-process",
    ]);
    let agent: RunningAgent | undefined;
    let a: FleetGateway | undefined;
    let links: PeerLinks | undefined;
    let client: TunnelClient | undefined;
    try {
      await waitFor(
        () => owner.output.join("").includes("gateway listening"),
        30_000,
        "owner listening",
      ).catch((err: Error) => {
        throw new Error(`${err.message}: ${owner.output.join("").slice(-2000)}`);
      });
      const agentPort = listeningAddresses(owner.output.join("")).agent.port;
      ({ agent } = await startTestAgent(pki, agentPort));
      const ownerInstance: PeerInstance = { id: "gw-owner-process", host: "127.0.0.1", port: peerPort };
      a = await startFleetGateway([...gatewayFlags(pki), "--server-id=gw-forwarder"], {
        directory: forwardEverything(
          () => links!,
          () => ownerInstance,
        ),
      });
      links = testPeerLinks(pki, peerPki, { log: a.log, metrics: a.gw.metrics });
      // Wait until the owner serves dials (its agent is connected).
      await waitFor(
        async () => {
          const d = recordingEnd();
          links!.dial(ownerInstance, context, { protocol: "tcp", address: backend.address }, d.end);
          const { link } = await d.outcome;
          link?.close();
          return link !== undefined;
        },
        15_000,
        "the owner serves dials",
      );

      // A CONNECT caller and a gRPC caller at A, each mid-download of an endless body.
      const connect = await connectThrough(
        { kind: "tls", host: "127.0.0.1", port: a.gw.addresses.frontend!.port, pki },
        backend.address,
      );
      expect(connect.status).toBe(200);
      const connectEnd = howItEnds(connect.socket);
      connect.socket.write("GET /stream?n=4000000000 HTTP/1.0\r\n\r\n");
      client = new TunnelClient(
        `127.0.0.1:${a.gw.addresses.frontend!.port}`,
        credentials.createSsl(
          Buffer.from(pki.ca.certPem),
          Buffer.from(pki.frontend.keyPem),
          Buffer.from(pki.frontend.certPem),
        ),
        { "grpc.ssl_target_name_override": "localhost" },
      );
      const tunnel = await client.dial(backend.address);
      const grpcEnd = howItEnds(tunnel as unknown as Socket);
      tunnel.write("GET /stream?n=4000000000 HTTP/1.0\r\n\r\n");
      await waitFor(
        () => connectEnd.bytes() > 1_000_000 && grpcEnd.bytes() > 1_000_000,
        10_000,
        "both downloading",
      );

      owner.child.kill("SIGKILL");
      const [c, g] = await Promise.all([connectEnd.ended, grpcEnd.ended]);
      // On failure, the forwarding instance's log of the tunnel says which way it went.
      const trail = a.logs.filter((l) => /CONNECT|peer|tunnel/.test(l)).join("\n");
      expect(c.how, trail).toBe("error");
      expect(BROKEN_TUNNEL_ERRORS, trail).toContain(c.code);
      expect(g).toMatchObject({ how: "error", code: "ERR_CONNECTION_BROKEN" });
      // And the owner is avoided until it comes back.
      await waitFor(() => !links!.isHealthy(ownerInstance), 5000, "owner marked failing");
      const d = recordingEnd();
      expect(() =>
        links!.dial(ownerInstance, context, { protocol: "tcp", address: backend.address }, d.end),
      ).toThrow(PeerUnavailableError);
    } finally {
      owner.child.kill("SIGKILL");
      await owner.exited;
      client?.close();
      await agent?.stop();
      await links?.close();
      await a?.gw.close();
    }
  });
});

/** The addresses in the "gateway listening" line of a kgw server's JSON log. */
function listeningAddresses(output: string): { agent: { port: number } } {
  for (const line of output.split("\n")) {
    if (!line.includes("gateway listening")) continue;
    return JSON.parse(line).addresses;
  }
  throw new Error("no listening line");
}

/** Counts bytes read from `s` and tells how it ended: a clean end, or an error (with its code). */
function howItEnds(s: Socket): { bytes(): number; ended: Promise<{ how: string; code?: string }> } {
  let n = 0;
  s.on("data", (c: Buffer) => {
    n += c.length;
  });
  return {
    bytes: () => n,
    ended: new Promise((resolve) => {
      s.once("end", () => resolve({ how: "end" }));
      s.once("error", (err: NodeJS.ErrnoException) => resolve({ how: "error", code: err.code ?? "" }));
      // A broken TLS tunnel can error twice (the gateway's fatal alert, then the reset behind it,
      // as break-socket.test.ts's reader knows): the first decides, a later one is expected. A
      // clean-clone CI saw the second go uncaught.
      s.on("error", () => {});
    }),
  };
}
