/**
 * Protocol-level clients for figures the ordinary clients hide:
 *  - RawProxyStream: one ProxyService.Proxy stream kept open, dialing on it packet by packet
 *    (DIAL_REQ → DIAL_RSP round trips without stream setup), with our wire codec;
 *  - idle agent streams, each on its own TLS connection as real agents have: AgentService.Connect
 *    over HTTP/2, opened with node:http2 directly (a grpc-js channel per fake agent would cost
 *    the benchmark process far more than the gateway it measures), or kgw-tunnel/1 (HELLO,
 *    wait for WELCOME) as our agent connects to our server.
 */
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { type ClientHttp2Session, type ClientHttp2Stream, connect as http2Connect } from "node:http2";
import { connect as netConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { Client, type ClientDuplexStream, Metadata } from "@grpc/grpc-js";
import { decodePacket, encodePacket } from "../../lib/proto/codec.js";
import { closeRequest, dataPacket, dialRequest, type Packet, PacketType } from "../../lib/proto/packet.js";
import { FrameDecoder, FrameType, TUNNEL_ALPN } from "../../lib/proto/tunnel-frames.js";
import { encodeHello } from "../../lib/transport/tunnel-handshake.js";
import { frontendCredentials } from "./paths.js";
import type { BenchPki } from "./pki.js";
import { LOOPBACK } from "./ports.js";
import { PING } from "./protocol.js";
import { inBatches, now, withTimeout } from "./util.js";

const PACKET_WAIT_MS = 15_000;
/** Packets nobody waited for are kept this long (a few dials' worth), then dropped. */
const MAX_UNCLAIMED = 256;

export function rawProxyClient(pki: BenchPki, frontendPort: number): Client {
  return new Client(`${LOOPBACK}:${frontendPort}`, frontendCredentials(pki), {
    "grpc.ssl_target_name_override": "localhost",
  });
}

export class RawProxyStream {
  private readonly call: ClientDuplexStream<Packet, Packet>;
  private readonly unclaimed: Packet[] = [];
  private waiter: { pred: (p: Packet) => boolean; resolve: (p: Packet) => void } | null = null;
  private failure: Error | null = null;

  constructor(client: Client) {
    this.call = client.makeBidiStreamRequest(
      "/ProxyService/Proxy",
      encodePacket,
      decodePacket,
      new Metadata(),
    );
    this.call.on("data", (p: Packet) => {
      if (this.waiter?.pred(p)) {
        const w = this.waiter;
        this.waiter = null;
        w.resolve(p);
        return;
      }
      this.unclaimed.push(p);
      if (this.unclaimed.length > MAX_UNCLAIMED) this.unclaimed.shift();
    });
    this.call.on("error", (err) => {
      this.failure = err;
    });
    this.call.on("end", () => {
      this.failure ??= new Error("stream ended");
    });
  }

  private next(pred: (p: Packet) => boolean): Promise<Packet> {
    const i = this.unclaimed.findIndex(pred);
    if (i >= 0) return Promise.resolve(this.unclaimed.splice(i, 1)[0]!);
    if (this.failure) return Promise.reject(this.failure);
    const wait = new Promise<Packet>((resolve) => {
      this.waiter = { pred, resolve };
    });
    return withTimeout(wait, PACKET_WAIT_MS, "packet").finally(() => {
      this.waiter = null;
    });
  }

  /** DIAL_REQ → DIAL_RSP; resolves with the connection ID and the round trip in ms. */
  async dial(address: string): Promise<{ connectId: bigint; ms: number }> {
    const random = randomBytes(8).readBigInt64BE() & 0x7fff_ffff_ffff_ffffn;
    const t0 = now();
    this.call.write(dialRequest(address, random));
    const rsp = await this.next((p) => p.type === PacketType.DIAL_RSP && p.random === random);
    const ms = now() - t0;
    if (rsp.type !== PacketType.DIAL_RSP || rsp.error) {
      throw new Error(`dial failed: ${rsp.type === PacketType.DIAL_RSP ? rsp.error : "?"}`);
    }
    return { connectId: rsp.connectId, ms };
  }

  /** PING through the connection and wait for the PONG. */
  async ping(connectId: bigint): Promise<void> {
    this.call.write(dataPacket(connectId, PING));
    await this.next((p) => p.type === PacketType.DATA && p.connectId === connectId);
  }

  /** CLOSE_REQ → CLOSE_RSP. */
  async close(connectId: bigint): Promise<void> {
    this.call.write(closeRequest(connectId));
    await this.next((p) => p.type === PacketType.CLOSE_RSP && p.connectId === connectId);
  }

  end(): void {
    this.call.on("error", () => {});
    this.call.cancel();
  }
}

/**
 * The client side's source address for agent `i` of `sources`: 127.0.0.1 for one source, else
 * one of 127.0.0.2 … (Linux routes all of 127.0.0.0/8 to loopback, so no set-up is needed): many
 * agents behind one NAT address against a fleet of nodes each with its own.
 */
export function sourceAddress(i: number, sources: number): string {
  if (sources <= 1) return LOOPBACK;
  if (sources > MAX_SOURCES) throw new RangeError(`at most ${MAX_SOURCES} source addresses: ${sources}`);
  return `127.0.0.${2 + (i % sources)}`;
}

/** 127.0.0.2 … 127.0.0.254. */
export const MAX_SOURCES = 253;

export interface AgentStreams {
  count: number;
  /** How many of them the server (or the network) has ended since they opened. */
  ended(): number;
  close(): void;
}

/**
 * Opens `count` idle agent streams, `concurrency` at a time, each with a distinct agent ID and
 * on its own connection; resolves once the server answered every one with its serverID header.
 * Authenticates both ways at once (client certificate and bearer token): our gateway in the
 * benchmark checks the token, upstream the certificate.
 */
export async function openAgentStreams(
  pki: BenchPki,
  agentPort: number,
  opts: {
    count: number;
    concurrency: number;
    idPrefix: string;
    token: string;
    transport?: "grpc" | "tunnel";
    /** Source addresses the agents connect from, in turn (sourceAddress); default one. */
    sources?: number;
  },
): Promise<AgentStreams> {
  if (opts.transport === "tunnel") return openTunnelAgents(pki, agentPort, opts);
  const sessions: ClientHttp2Session[] = [];
  const ended = { n: 0 };
  return openAll(
    opts,
    ended,
    () => {
      for (const s of sessions) s.destroy();
    },
    async (i) => {
      const agent = connectGrpcAgent(
        pki,
        agentPort,
        `${opts.idPrefix}-${i}`,
        opts.token,
        sourceAddress(i, opts.sources ?? 1),
      );
      sessions.push(agent.session);
      agent.stream.once("close", () => ended.n++);
      await agent.registered;
    },
  );
}

/**
 * One upstream-style agent: a TLS connection of its own, HTTP/2, AgentService.Connect.
 * `registered` resolves once the server answered with its serverID header and rejects when the
 * connection or the stream ends first (a refused connection: reset before TLS, or refused in
 * the handshake) or after AGENT_STREAM_WAIT_MS.
 */
export function connectGrpcAgent(
  pki: BenchPki,
  agentPort: number,
  agentId: string,
  token: string,
  localAddress: string = LOOPBACK,
): { session: ClientHttp2Session; stream: ClientHttp2Stream; registered: Promise<void> } {
  const session = http2Connect(`https://${LOOPBACK}:${agentPort}`, {
    createConnection: () =>
      tlsConnect({
        socket: netConnect({ host: LOOPBACK, port: agentPort, localAddress }),
        ca: pki.caPem,
        cert: pki.agentCertPem,
        key: pki.agentKeyPem,
        servername: "localhost",
        ALPNProtocols: ["h2"],
      }),
  });
  session.on("error", () => {});
  const stream = session.request(
    {
      ":method": "POST",
      ":path": "/AgentService/Connect",
      "content-type": "application/grpc",
      te: "trailers",
      agentid: agentId,
      authorization: `Bearer ${token}`,
    },
    { endStream: false },
  );
  stream.on("error", () => {});
  const registered = withTimeout(
    new Promise<void>((resolve, reject) => {
      stream.once("response", (headers) => {
        if (headers.serverid) resolve();
        else reject(new Error(`agent stream refused: ${JSON.stringify(headers)}`));
      });
      stream.once("close", () => reject(new Error("agent stream closed")));
    }),
    AGENT_STREAM_WAIT_MS,
    "agent stream",
  );
  return { session, stream, registered };
}

const AGENT_STREAM_WAIT_MS = 30_000;

/** Opens every agent (`openOne(i)`), closing all of them if one fails. */
async function openAll(
  opts: { count: number; concurrency: number },
  ended: { n: number },
  close: () => void,
  openOne: (i: number) => Promise<void>,
): Promise<AgentStreams> {
  try {
    await inBatches(opts.count, opts.concurrency, openOne);
  } catch (err) {
    close();
    throw err;
  }
  return { count: opts.count, ended: () => ended.n, close };
}

/** The same over kgw-tunnel/1: one TLS socket each, HELLO, then wait for WELCOME. */
async function openTunnelAgents(
  pki: BenchPki,
  agentPort: number,
  opts: { count: number; concurrency: number; idPrefix: string; token: string; sources?: number },
): Promise<AgentStreams> {
  const sockets: ReturnType<typeof tlsConnect>[] = [];
  const ended = { n: 0 };
  return openAll(
    opts,
    ended,
    () => {
      for (const s of sockets) s.destroy();
    },
    async (i) => {
      const socket = tlsConnect({
        socket: netConnect({
          host: LOOPBACK,
          port: agentPort,
          localAddress: sourceAddress(i, opts.sources ?? 1),
        }),
        ca: pki.caPem,
        cert: pki.agentCertPem,
        key: pki.agentKeyPem,
        servername: "localhost",
        ALPNProtocols: [TUNNEL_ALPN],
      });
      socket.on("error", () => {});
      socket.once("close", () => ended.n++);
      sockets.push(socket);
      await withTimeout(once(socket, "secureConnect"), AGENT_STREAM_WAIT_MS, "agent TLS handshake");
      if (socket.alpnProtocol !== TUNNEL_ALPN) throw new Error(`server chose ALPN ${socket.alpnProtocol}`);
      socket.write(
        encodeHello({ agentid: [`${opts.idPrefix}-${i}`], authorization: [`Bearer ${opts.token}`] }),
      );
      const decoder = new FrameDecoder();
      await withTimeout(
        new Promise<void>((resolve, reject) => {
          const onData = (chunk: Buffer) => {
            decoder.push(chunk);
            const f = decoder.next();
            if (f === null) return;
            socket.off("data", onData);
            if (f.kind === "frame" && f.type === FrameType.WELCOME) resolve();
            else
              reject(
                new Error(`agent stream refused: ${f.kind === "frame" ? f.payload.toString() : "DATA"}`),
              );
          };
          socket.on("data", onData);
          socket.once("close", () => reject(new Error("agent stream closed")));
        }),
        AGENT_STREAM_WAIT_MS,
        "agent stream",
      );
    },
  );
}
