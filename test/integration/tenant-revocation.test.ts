/**
 * What a credential that stops being valid takes with it, seen from the peers it authenticated:
 * a caller or an agent that showed a certificate AND a token loses everything either one opened
 * when either is revoked, and a gRPC caller whose tenant is deleted reads why in its call's status
 * (UNAUTHENTICATED, the reason named), whichever of its agent and itself the gateway cuts first.
 *
 * One gateway in tenant mode, tenants made with the real `kgw tenant` command, our real agent,
 * an echo backend, and the clients an operator's users run (Node's https CONNECT, grpc-js).
 */

import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { createServer as createNetServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { credentials, Metadata, status } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningAgent } from "../../lib/agent/agent.js";
import { dataPacket, dialRequest, PacketType } from "../../lib/proto/packet.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { BROKEN_TUNNEL_ERRORS } from "../helpers/connect-client.js";
import { startTenantGateway, type TestGateway } from "../helpers/gateway.js";
import { type PacketCall, RawClient } from "../helpers/grpc-clients.js";
import { isType, PacketQueue } from "../helpers/packet-queue.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";
import { type CreatedTenant, makeTenantStore, type TestTenantStore } from "../helpers/tenants.js";

/**
 * The documented bound (docs/TENANCY.md, "How fast a running gateway sees it"): one watch interval
 * plus one read. The watch here polls every 200 ms; allowed: 2 s, for a loaded machine.
 */
const WATCH_INTERVAL_MS = 200;
const REVOCATION_BOUND_MS = 2000;

let pki: TestPki;
let store: TestTenantStore;
let t: TestGateway;
let echo: { address: string; close(): Promise<void> };
let port: number;
let baseline: Map<string, number>;
let acme: CreatedTenant;
const running = new Set<RunningAgent>();
const clients: RawClient[] = [];
const sockets = new Set<Socket>();

interface Pem {
  certPem: Buffer;
  keyPem: Buffer;
}
interface Who {
  cert?: Pem;
  token?: string;
}

async function startEchoBackend(): Promise<typeof echo> {
  const open = new Set<Socket>();
  const server: Server = createNetServer((s) => {
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    s.pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port: p } = server.address() as { port: number };
  return {
    address: `127.0.0.1:${p}`,
    close: () =>
      new Promise((r) => {
        for (const s of open) s.destroy();
        server.close(() => r());
      }),
  };
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms}ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

async function startAgent(flags: string[]): Promise<RunningAgent> {
  const { agent } = await startTestAgent(pki, port, flags);
  running.add(agent);
  return agent;
}

async function stopAgent(agent: RunningAgent): Promise<void> {
  running.delete(agent);
  await agent.stop();
}

/** A new caller certificate of `tenant` (`kgw tenant bundle`), and its serial. */
async function callerBundle(tenant: string, name: string): Promise<{ cert: Pem; serial: string }> {
  const r = (await store.run(["bundle", tenant, `--out=${join(store.dir, "..", name)}`])) as {
    bundle: { files: Record<string, string>; serial: string };
  };
  const f = r.bundle.files;
  return {
    cert: { certPem: readFileSync(f.clientCert!), keyPem: readFileSync(f.clientKey!) },
    serial: r.bundle.serial,
  };
}

/** A new agent certificate of `tenant` (`kgw tenant rotate --credential=agent-certificate`). */
async function agentBundle(tenant: string, name: string): Promise<{ flags: string[]; serial: string }> {
  const r = (await store.run([
    "rotate",
    tenant,
    "--credential=agent-certificate",
    `--out=${join(store.dir, "..", name)}`,
  ])) as { agentBundle: { files: Record<string, string>; serial: string } };
  const f = r.agentBundle.files;
  return {
    flags: [`--agent-cert=${f.agentCert}`, `--agent-key=${f.agentKey}`],
    serial: r.agentBundle.serial,
  };
}

const tokenId = (token: string) => token.split("_")[3]!;

/** A grpc-js client on the one port showing `who`: the certificate in TLS, the token as metadata. */
function rawClient(who: Who): RawClient {
  const ca = Buffer.from(pki.ca.certPem);
  const tls = who.cert
    ? credentials.createSsl(ca, who.cert.keyPem, who.cert.certPem)
    : credentials.createSsl(ca);
  const token = who.token;
  const creds =
    token === undefined
      ? tls
      : credentials.combineChannelCredentials(
          tls,
          credentials.createFromMetadataGenerator((_params, cb) => {
            const md = new Metadata();
            md.set("authorization", `Bearer ${token}`);
            cb(null, md);
          }),
        );
  const c = new RawClient(`127.0.0.1:${port}`, creds);
  clients.push(c);
  return c;
}

interface CallEnd {
  code: number;
  details: string;
  at: number;
}

/** A ProxyService.Proxy call as `who`, with its packets and its status when it ends. */
function proxyCall(who: Who): { call: PacketCall; packets: PacketQueue; ended: Promise<CallEnd> } {
  const call = rawClient(who).proxy();
  const packets = new PacketQueue(call);
  const ended = new Promise<CallEnd>((resolve) => {
    call.on("error", () => {});
    call.once("status", (s: { code: number; details: string }) =>
      resolve({ code: s.code, details: s.details, at: Date.now() }),
    );
  });
  return { call, packets, ended };
}

/** Dials the echo backend on `call`; resolves once a byte went there and back. */
async function dialEcho(c: ReturnType<typeof proxyCall>, random: bigint): Promise<void> {
  c.call.write(dialRequest(echo.address, random));
  const rsp = await c.packets.next(isType(PacketType.DIAL_RSP));
  expect(rsp.error).toBe("");
  c.call.write(dataPacket(rsp.connectId, Buffer.from("ping")));
  await c.packets.next(isType(PacketType.DATA));
}

/** CONNECT to the echo backend as `who`; resolves with the status, and how the tunnel ended. */
function connectAs(
  who: Who,
): Promise<{ status: number; socket: Socket; ended: Promise<{ how: string; at: number }> }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      method: "CONNECT",
      path: echo.address,
      host: "127.0.0.1",
      port,
      servername: "localhost",
      ca: pki.ca.certPem,
      agent: false,
      headers: {
        host: echo.address,
        ...(who.token !== undefined ? { "proxy-authorization": `Bearer ${who.token}` } : {}),
      },
      ...(who.cert ? { cert: who.cert.certPem, key: who.cert.keyPem } : {}),
    });
    req.once("connect", (res, socket: Socket) => {
      sockets.add(socket);
      const ended = new Promise<{ how: string; at: number }>((r) => {
        socket.once("error", (err: NodeJS.ErrnoException) =>
          r({ how: err.code ?? err.message, at: Date.now() }),
        );
        socket.once("end", () => r({ how: "end", at: Date.now() }));
        socket.once("close", () => r({ how: "close", at: Date.now() }));
      });
      resolve({ status: res.statusCode ?? 0, socket, ended });
    });
    req.once("error", reject);
    req.end();
  });
}

/**
 * Waits until `who` is authenticated (a credential just issued is in force from the next read of
 * the store): anything but 401 and 407, a 503 for want of an agent included.
 */
async function untilServed(who: Who): Promise<void> {
  await waitFor(
    async () => {
      const r = await connectAs(who);
      r.socket.destroy();
      return r.status !== 401 && r.status !== 407;
    },
    5000,
    "the new credential served",
  );
}

/** The agent sessions of `tenant` on the gateway, by identity. */
const agentsOf = (tenant: string) => t.gw.registry.agents(tenant);

beforeAll(async () => {
  pki = await getTestPki();
  baseline = resources();
  store = makeTenantStore(pki);
  // The store exists once it holds a tenant; the gateway refuses to start without one.
  acme = await store.create("acme");
  t = await startTenantGateway(store.dir, [
    `--tenant-watch-interval=${WATCH_INTERVAL_MS}ms`,
    // Refusals on reconnect come from 127.0.0.1 like everything else here.
    "--refusal-throttle-threshold=0",
  ]);
  port = t.gw.addresses.agent!.port;
  echo = await startEchoBackend();
});

afterAll(async () => {
  for (const a of [...running]) await stopAgent(a);
  for (const c of clients) c.close();
  for (const s of sockets) s.destroy();
  await t?.gw.close();
  await echo?.close();
  store?.remove();
  await expectNoLeakedResources(baseline);
});

describe("a caller that showed a certificate and a token", () => {
  beforeAll(async () => {
    await startAgent([`--agent-token=${acme.agentToken}`, "--agent-id=acme-agent"]);
    await waitFor(() => agentsOf("acme").length === 1, 5000, "acme's agent");
  });

  for (const revoked of ["certificate", "token"] as const) {
    it(`loses its CONNECT tunnel and gRPC call when its ${revoked} is revoked`, async () => {
      const { cert, serial } = await callerBundle("acme", `acme-${revoked}`);
      // Revoking the token below leaves acme without one: each case gets a token of its own.
      const token =
        revoked === "token"
          ? ((await store.run(["rotate", "acme", "--credential=caller-token"])) as { token: string }).token
          : acme.callerToken;
      const who = { cert, token };
      await untilServed(who);

      const tunnel = await connectAs(who);
      expect(tunnel.status).toBe(200);
      const grpc = proxyCall(who);
      await dialEcho(grpc, 1n);

      const revokedAt = Date.now();
      await store.run(["revoke", "acme", revoked === "certificate" ? serial : tokenId(token), "--yes"]);
      const [tunnelEnd, callEnd] = await within(
        Promise.all([tunnel.ended, grpc.ended]),
        5000,
        "the tunnel and the call closed",
      );
      console.log(
        `cert+token caller, ${revoked} revoked: CONNECT ${tunnelEnd.how} after ${tunnelEnd.at - revokedAt} ms, gRPC ${callEnd.code} after ${callEnd.at - revokedAt} ms`,
      );
      // Broken off, never ended: an error after the last byte (break-socket.ts), not a FIN.
      expect(BROKEN_TUNNEL_ERRORS).toContain(tunnelEnd.how);
      expect(callEnd).toMatchObject({
        code: status.UNAUTHENTICATED,
        details: expect.stringContaining("(revoked)"),
      });
      for (const end of [tunnelEnd, callEnd]) expect(end.at - revokedAt).toBeLessThan(REVOCATION_BOUND_MS);
      // And the pair is refused from then on.
      expect((await connectAs(who)).status).toBe(401);
    });
  }
});

describe("an agent that showed a certificate and a token", () => {
  for (const revoked of ["certificate", "token"] as const) {
    it(`is disconnected, its tunnels reset, when its ${revoked} is revoked; its reconnects are refused`, async () => {
      const id = `initech-${revoked === "certificate" ? "c" : "t"}`;
      const tenant = await store.create(id);
      const bundle = await agentBundle(id, `${id}-agent`);
      const agent = await startAgent([
        `--agent-token=${tenant.agentToken}`,
        ...bundle.flags,
        `--agent-id=${id}-agent`,
      ]);
      await waitFor(() => agentsOf(id).length === 1, 5000, "the agent with both credentials");
      const tunnel = await connectAs({ token: tenant.callerToken });
      expect(tunnel.status).toBe(200);

      const revokedAt = Date.now();
      await store.run([
        "revoke",
        id,
        revoked === "certificate" ? bundle.serial : tokenId(tenant.agentToken),
        "--yes",
      ]);
      const end = await within(tunnel.ended, 5000, "the tunnel through the agent closed");
      await waitFor(() => agentsOf(id).length === 0, REVOCATION_BOUND_MS, "the agent disconnected");
      const goneAfter = Date.now() - revokedAt;
      console.log(
        `cert+token agent, ${revoked} revoked: tunnel ${end.how} after ${end.at - revokedAt} ms, agent gone after ${goneAfter} ms`,
      );
      expect(BROKEN_TUNNEL_ERRORS).toContain(end.how);
      expect(end.at - revokedAt).toBeLessThan(REVOCATION_BOUND_MS);
      // It keeps trying (every 50-200 ms in tests) and is refused: the caller finds no agent.
      const refusedBefore = await refusedAgents();
      await waitFor(async () => (await refusedAgents()) >= refusedBefore + 2, 5000, "two refused reconnects");
      expect(agentsOf(id)).toEqual([]);
      expect((await connectAs({ token: tenant.callerToken })).status).toBe(503);
      await stopAgent(agent);
    });
  }
});

/** Agent streams refused for a credential, all reasons (kgw_server_rejected_connections_total). */
async function refusedAgents(): Promise<number> {
  const m = await t.gw.metrics.rejectedConnections.get();
  return m.values.filter((v) => v.labels.listener === "agent").reduce((n, v) => n + v.value, 0);
}

describe("a deleted tenant's gRPC caller", () => {
  for (const first of ["agent", "caller"] as const) {
    it(`ends UNAUTHENTICATED naming the deletion when the gateway cuts the ${first} first`, async () => {
      const id = `umbrella-${first}`;
      const tenant = await store.create(id);
      const agentFlags = [`--agent-token=${tenant.agentToken}`, `--agent-id=${id}-agent`];
      // Credentials are re-checked in the order they were first held: whoever connected first
      // is cut first.
      let grpc: ReturnType<typeof proxyCall>;
      let agent: RunningAgent;
      if (first === "agent") {
        agent = await startAgent(agentFlags);
        await waitFor(() => agentsOf(id).length === 1, 5000, "the agent");
        grpc = proxyCall({ token: tenant.callerToken });
      } else {
        await untilServed({ token: tenant.callerToken }); // the gateway has read the new tenant
        grpc = proxyCall({ token: tenant.callerToken });
        // Accepted (so held) before the agent is: a dial with no agent is answered, not refused.
        grpc.call.write(dialRequest(echo.address, 9n));
        expect((await grpc.packets.next(isType(PacketType.DIAL_RSP))).error).not.toBe("");
        agent = await startAgent(agentFlags);
        await waitFor(() => agentsOf(id).length === 1, 5000, "the agent");
      }
      // Tunnels open on the call, so that cutting the agent has something to tell it.
      await dialEcho(grpc, 1n);
      await dialEcho(grpc, 2n);

      const deletedAt = Date.now();
      await store.run(["delete", id, "--yes"]);
      const end = await within(grpc.ended, 5000, "the call's end");
      console.log(
        `deleted tenant, ${first} cut first: gRPC ${JSON.stringify(end)} after ${end.at - deletedAt} ms`,
      );
      expect(end).toMatchObject({
        code: status.UNAUTHENTICATED,
        details: expect.stringContaining("(tenant-deleted)"),
      });
      expect(end.at - deletedAt).toBeLessThan(REVOCATION_BOUND_MS);
      await waitFor(() => agentsOf(id).length === 0, REVOCATION_BOUND_MS, "the agent disconnected");
      await stopAgent(agent);
    });
  }
});
