import { once } from "node:events";
import { type AddressInfo, connect, createServer, isIP, type Server, Socket } from "node:net";
import { Duplex } from "node:stream";
import { afterEach, describe, expect, it, vi } from "vitest";
import { BackendDialer } from "../../lib/agent/backend-dialer.js";
import { ConnectIdAllocator } from "../../lib/agent/connect-ids.js";
import { type DestinationPolicy, dropInDestinationPolicy } from "../../lib/agent/destination-policy.js";
import {
  defaultSocketFactory,
  parseDialTarget,
  type ResolvedTarget,
  type SocketFactory,
} from "../../lib/agent/dial-target.js";
import { type HostResolver, type ResolvedAddress, systemResolver } from "../../lib/agent/host-resolver.js";
import { validateEgressPolicy } from "../../lib/egress/egress-policy.js";
import { egressWireText } from "../../lib/egress/egress-wire.js";
import { agentDialError } from "../../lib/errors.js";
import { AgentMetrics } from "../../lib/metrics/agent-metrics.js";
import { silentLogger } from "../../lib/observability/logger.js";
import {
  type CloseResponsePacket,
  closeDial,
  closeRequest,
  type DialResponsePacket,
  dataPacket,
  dialRequest,
  type Packet,
  PacketType,
} from "../../lib/proto/packet.js";
import { FrameDecoder } from "../../lib/proto/tunnel-frames.js";
import { FramedPacketStream } from "../../lib/transport/framed-packet-stream.js";

/** The server's end of an agent stream: what the agent writes lands in `sent`. */
function fakeServerStream(opts: { holdWrites?: boolean } = {}) {
  const sent: Packet[] = [];
  const held: Array<() => void> = [];
  const stream = new Duplex({
    objectMode: true,
    read() {},
    write(chunk: Packet, _enc, cb) {
      sent.push(chunk);
      if (opts.holdWrites) held.push(cb);
      else cb();
    },
  });
  stream.on("error", () => {});
  return {
    stream,
    sent,
    deliver: (p: Packet) => stream.push(p),
    end: () => stream.push(null),
    releaseWrites: () => {
      opts.holdWrites = false;
      for (const cb of held.splice(0)) cb();
    },
  };
}

const dialResponses = (sent: Packet[]) =>
  sent.filter((p): p is DialResponsePacket => p.type === PacketType.DIAL_RSP);
const closeResponses = (sent: Packet[]) =>
  sent.filter((p): p is CloseResponsePacket => p.type === PacketType.CLOSE_RSP);
const dataFrom = (sent: Packet[], connectId: bigint) =>
  Buffer.concat(
    sent.flatMap((p) =>
      p.type === PacketType.DATA && p.connectId === connectId ? [Buffer.from(p.data)] : [],
    ),
  );

interface Backend {
  server: Server;
  port: number;
  sockets: Socket[];
}

const toClose: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of toClose.splice(0).reverse()) await c();
});

/** A real TCP server on 127.0.0.1:0; `onConnection` decides what it does with each socket. */
async function backend(
  onConnection: (s: Socket) => void = () => {},
  allowHalfOpen = false,
): Promise<Backend> {
  const sockets: Socket[] = [];
  const server = createServer({ allowHalfOpen }, (s) => {
    sockets.push(s);
    s.on("error", () => {});
    onConnection(s);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  toClose.push(async () => {
    // Runs after the dialer was shut down: every connection it made must be gone by itself.
    await vi.waitFor(async () => expect(await connections(server)).toBe(0));
    if (!server.listening) return;
    server.close();
    await once(server, "close");
  });
  return { server, port: (server.address() as AddressInfo).port, sockets };
}

const connections = (server: Server) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
  );

/**
 * Names the tests use, so that no test queries DNS; literals resolve as dns.lookup resolves
 * them, without a query. 192.0.2.0/24 is TEST-NET-1: only ever given to sockets that never connect.
 */
const NAMES: Record<string, ResolvedAddress[]> = {
  "unreachable.invalid": [{ address: "192.0.2.1", family: 4 }],
  "backend.test": [{ address: "127.0.0.1", family: 4 }],
  "metadata.test": [{ address: "169.254.169.254", family: 4 }],
  "mixed.test": [
    { address: "192.0.2.7", family: 4 },
    { address: "::ffff:169.254.169.254", family: 6 },
  ],
};
const testResolver: HostResolver = async (host) => {
  const known = NAMES[host];
  if (known) return known;
  if (isIP(host)) return systemResolver(host);
  throw new Error(`getaddrinfo ENOTFOUND ${host}`);
};

function setup(
  opts: {
    connectSocket?: SocketFactory;
    dialTimeoutMs?: number;
    holdWrites?: boolean;
    resolveHost?: HostResolver;
    destinationPolicy?: DestinationPolicy;
  } = {},
) {
  const fake = fakeServerStream({ holdWrites: opts.holdWrites });
  const metrics = new AgentMetrics();
  const agentSockets: Socket[] = [];
  const factory = opts.connectSocket ?? defaultSocketFactory;
  const dialer = new BackendDialer(fake.stream, {
    dialTimeoutMs: opts.dialTimeoutMs ?? 5_000,
    connectIds: new ConnectIdAllocator(),
    connectSocket: (t) => {
      const s = factory(t);
      agentSockets.push(s);
      return s;
    },
    resolveHost: opts.resolveHost ?? testResolver,
    destinationPolicy: opts.destinationPolicy,
    log: silentLogger(),
    metrics,
  });
  toClose.push(() => {
    dialer.shutdown();
  });
  const gauge = async (name: "openEndpointConnections") => (await metrics[name].get()).values[0]?.value ?? 0;
  return { ...fake, dialer, metrics, agentSockets, gauge };
}

/** Dials `port` and waits for the DIAL_RSP; returns its connectID. */
async function dialOk(ctx: ReturnType<typeof setup>, port: number, random: bigint): Promise<bigint> {
  ctx.deliver(dialRequest(`127.0.0.1:${port}`, random));
  const rsp = await vi.waitFor(() => {
    const r = dialResponses(ctx.sent).find((p) => p.random === random);
    if (!r) throw new Error("no DIAL_RSP yet");
    return r;
  });
  expect(rsp.error).toBe("");
  return rsp.connectId;
}

describe("BackendDialer", () => {
  it("dials a backend and answers DIAL_RSP with a fresh connectID", async () => {
    const be = await backend();
    const ctx = setup();
    const first = await dialOk(ctx, be.port, 11n);
    const second = await dialOk(ctx, be.port, 12n);
    expect(first).toBe(1n);
    expect(second).toBe(2n);
    expect(ctx.dialer.load).toBe(2);
    expect(await ctx.gauge("openEndpointConnections")).toBe(2);
    await vi.waitFor(async () => expect(await connections(be.server)).toBe(2));
  });

  it("answers a refused dial with DIAL_RSP carrying the error", async () => {
    const be = await backend();
    const port = be.port;
    be.server.close(); // nothing listens on the port any more
    await once(be.server, "close");
    const ctx = setup();
    ctx.deliver(dialRequest(`127.0.0.1:${port}`, 7n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp).toMatchObject({ random: 7n, connectId: 0n });
    expect(rsp.error).toMatch(/^dial tcp 127\.0\.0\.1:\d+: .*ECONNREFUSED/);
    expect((await ctx.metrics.endpointDialFailures.get()).values).toEqual([
      expect.objectContaining({ labels: { reason: "unknown" }, value: 1 }),
    ]);
    expect(ctx.dialer.load).toBe(0);
  });

  it("refuses protocols other than tcp and malformed addresses without dialing", async () => {
    const ctx = setup();
    ctx.deliver(dialRequest("127.0.0.1:80", 1n, "udp"));
    ctx.deliver(dialRequest("no-port", 2n));
    await vi.waitFor(() => expect(dialResponses(ctx.sent)).toHaveLength(2));
    expect(dialResponses(ctx.sent).map((r) => r.error)).toEqual([
      "dial udp 127.0.0.1:80: unknown network udp",
      "dial tcp no-port: address missing port",
    ]);
    expect(ctx.agentSockets).toHaveLength(0);
  });

  it("times out a dial that never completes", async () => {
    const ctx = setup({ connectSocket: () => new Socket(), dialTimeoutMs: 50 });
    ctx.deliver(dialRequest("unreachable.invalid:443", 3n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp.error).toBe("dial tcp unreachable.invalid:443: i/o timeout");
    expect(ctx.agentSockets[0]!.destroyed).toBe(true);
    expect((await ctx.metrics.endpointDialFailures.get()).values[0]).toMatchObject({
      labels: { reason: "timeout" },
      value: 1,
    });
  });

  it("DIAL_CLS cancels a pending dial: socket destroyed, nothing sent", async () => {
    const ctx = setup({ connectSocket: () => new Socket(), dialTimeoutMs: 60_000 });
    ctx.deliver(dialRequest("unreachable.invalid:443", 5n));
    await vi.waitFor(() => expect(ctx.agentSockets).toHaveLength(1)); // resolved, connecting
    expect(ctx.dialer.load).toBe(1);
    ctx.deliver(closeDial(5n));
    await vi.waitFor(() => expect(ctx.dialer.load).toBe(0));
    expect(ctx.agentSockets[0]!.destroyed).toBe(true);
    // A DIAL_CLS for a dial that is not pending is ignored too.
    ctx.deliver(closeDial(99n));
    await new Promise((r) => setImmediate(r));
    expect(ctx.sent).toEqual([]);
  });

  it("carries data both ways", async () => {
    const be = await backend((s) => s.on("data", (d) => s.write(Buffer.concat([Buffer.from("echo:"), d]))));
    const ctx = setup();
    const id = await dialOk(ctx, be.port, 1n);
    ctx.deliver(dataPacket(id, Buffer.from("hello")));
    await vi.waitFor(() => expect(dataFrom(ctx.sent, id).toString()).toBe("echo:hello"));
  });

  it("writes the DATA packets of one received chunk to the backend in one writev", async () => {
    const got: Buffer[] = [];
    const be = await backend((s) => s.on("data", (d) => got.push(d)));
    const ctx = setup();
    const id = await dialOk(ctx, be.port, 1n);
    const socket = ctx.agentSockets[0]!;
    const writes: number[] = [];
    const w = socket as unknown as {
      _write: (...a: unknown[]) => void;
      _writev: (chunks: unknown[], cb: unknown) => void;
    };
    const write = w._write.bind(socket);
    const writev = w._writev.bind(socket);
    w._write = (...a) => {
      writes.push(1);
      write(...a);
    };
    w._writev = (chunks, cb) => {
      writes.push(chunks.length);
      writev(chunks, cb);
    };
    // The end of one DATA frame and the start of the next, as the decoder hands over one TLS read.
    ctx.deliver(dataPacket(id, Buffer.from("tail-of-one|")));
    ctx.deliver(dataPacket(id, Buffer.from("head-of-next")));
    await vi.waitFor(() => expect(Buffer.concat(got).toString()).toBe("tail-of-one|head-of-next"));
    expect(writes).toEqual([2]);
  });

  it("answers an established dial and opens its credit window in one write to the server", async () => {
    const be = await backend();
    // A kgw-tunnel/1 stream over real sockets, as `kgw agent` holds it by default.
    const listener = createServer();
    listener.listen(0, "127.0.0.1");
    await once(listener, "listening");
    const accepted = once(listener, "connection");
    const agentEnd = connect((listener.address() as AddressInfo).port, "127.0.0.1");
    const [serverEnd] = (await accepted) as [Socket];
    await once(agentEnd, "connect");
    const noKeepalive = { keepaliveMs: 0, keepaliveTimeoutMs: 0 };
    const server = new FramedPacketStream(serverEnd, new FrameDecoder(), noKeepalive);
    const got: Packet[] = [];
    server.on("data", (p: Packet) => got.push(p));
    const dialer = new BackendDialer(new FramedPacketStream(agentEnd, new FrameDecoder(), noKeepalive), {
      dialTimeoutMs: 5_000,
      flow: "credit",
      connectIds: new ConnectIdAllocator(),
      resolveHost: testResolver,
      log: silentLogger(),
      metrics: new AgentMetrics(),
    });
    toClose.push(async () => {
      dialer.shutdown();
      agentEnd.destroy();
      serverEnd.destroy();
      listener.close();
      await once(listener, "close");
    });
    // Every write the agent makes towards the server (a system call and, over TLS, a record each).
    const writes: number[] = [];
    const w = agentEnd as unknown as {
      _write: (...a: unknown[]) => void;
      _writev: (chunks: unknown[], cb: unknown) => void;
    };
    const write = w._write.bind(agentEnd);
    const writev = w._writev.bind(agentEnd);
    w._write = (...a) => {
      writes.push(1);
      write(...a);
    };
    w._writev = (chunks, cb) => {
      writes.push(chunks.length);
      writev(chunks, cb);
    };
    server.write(dialRequest(`127.0.0.1:${be.port}`, 1n));
    await vi.waitFor(() =>
      expect(got.map((p) => p.type)).toEqual([PacketType.DIAL_RSP, PacketType.KGW_CREDIT]),
    );
    expect((got[0] as DialResponsePacket).error).toBe("");
    expect(writes).toEqual([2]);
  });

  it("CLOSE_REQ closes the backend socket and answers CLOSE_RSP", async () => {
    const be = await backend();
    const ctx = setup();
    const id = await dialOk(ctx, be.port, 1n);
    await vi.waitFor(() => expect(be.sockets).toHaveLength(1));
    const ended = once(be.sockets[0]!, "end");
    ctx.deliver(closeRequest(id));
    await vi.waitFor(() =>
      expect(closeResponses(ctx.sent)).toEqual([expect.objectContaining({ connectId: id, error: "" })]),
    );
    await ended; // the backend sees our FIN
    be.sockets[0]!.end();
    await vi.waitFor(async () => expect(await connections(be.server)).toBe(0));
    expect(ctx.dialer.load).toBe(0);
    expect(await ctx.gauge("openEndpointConnections")).toBe(0);
  });

  it("a backend still open after CLOSE_REQ is cut off when the stream ends", async () => {
    const be = await backend(() => {}, true); // keeps its side open after our FIN
    const ctx = setup();
    const id = await dialOk(ctx, be.port, 1n);
    ctx.deliver(closeRequest(id));
    await vi.waitFor(() => expect(closeResponses(ctx.sent)).toHaveLength(1));
    const agentSocket = ctx.agentSockets[0]!;
    await vi.waitFor(() => expect(agentSocket.writableFinished).toBe(true)); // our FIN went out
    expect(agentSocket.destroyed).toBe(false); // waiting for the backend's
    ctx.end();
    await vi.waitFor(() => expect(agentSocket.destroyed).toBe(true));
    for (const s of be.sockets) s.destroy(); // the half-open backend never closes by itself
  });

  it("backend EOF sends everything it wrote, then CLOSE_RSP", async () => {
    const be = await backend((s) => s.end("bye"));
    const ctx = setup();
    const id = await dialOk(ctx, be.port, 1n);
    await vi.waitFor(() => expect(closeResponses(ctx.sent)).toHaveLength(1));
    expect(closeResponses(ctx.sent)[0]).toMatchObject({ connectId: id, error: "" });
    const closeAt = ctx.sent.findIndex((p) => p.type === PacketType.CLOSE_RSP);
    expect(dataFrom(ctx.sent.slice(0, closeAt), id).toString()).toBe("bye");
    expect(ctx.dialer.load).toBe(0);
    await vi.waitFor(async () => expect(await connections(be.server)).toBe(0));
  });

  it("has written the CLOSE_RSP by the time its load drops to zero, on either side's close", async () => {
    // Whoever ends the stream once the load is zero (a drained server's connection) must find
    // the last tunnel's close already written, not about to be.
    const be = await backend((s) => {
      if (be.sockets.length === 1) s.end("bye");
    });
    const ctx = setup();
    const closesAtZero: number[] = [];
    ctx.dialer.on("load", (load) => {
      if (load === 0) closesAtZero.push(closeResponses(ctx.sent).length);
    });
    await dialOk(ctx, be.port, 1n); // the backend closes this one
    await vi.waitFor(() => expect(closesAtZero).toEqual([1]));
    const second = await dialOk(ctx, be.port, 2n);
    ctx.deliver(closeRequest(second)); // the server closes this one
    await vi.waitFor(() => expect(closesAtZero).toEqual([1, 2]));
    for (const s of be.sockets) s.destroy();
  });

  it("answers CLOSE_REQ and DATA for unknown connectIDs with CLOSE_RSP errors", async () => {
    const ctx = setup();
    ctx.deliver(closeRequest(42n));
    ctx.deliver(dataPacket(43n, Buffer.from("x")));
    await vi.waitFor(() => expect(closeResponses(ctx.sent)).toHaveLength(2));
    expect(closeResponses(ctx.sent)).toEqual([
      expect.objectContaining({ connectId: 42n, error: "unknown connectID" }),
      expect.objectContaining({ connectId: 43n, error: "unknown connectID" }),
    ]);
  });

  it("closes every backend socket and pending dial when the stream ends", async () => {
    const be = await backend();
    const hanging = new Socket();
    const ctx = setup({
      connectSocket: (t) => (t.port === be.port ? defaultSocketFactory(t) : hanging),
      dialTimeoutMs: 60_000,
    });
    await dialOk(ctx, be.port, 1n);
    await dialOk(ctx, be.port, 2n);
    ctx.deliver(dialRequest("127.0.0.1:9", 3n));
    await vi.waitFor(() => expect(ctx.dialer.load).toBe(3));
    const closed = once(ctx.dialer, "closed");
    ctx.end();
    await closed;
    expect(ctx.dialer.load).toBe(0);
    expect(hanging.destroyed).toBe(true);
    expect(ctx.agentSockets.every((s) => s.destroyed)).toBe(true);
    expect(await ctx.gauge("openEndpointConnections")).toBe(0);
    await vi.waitFor(async () => expect(await connections(be.server)).toBe(0));
    // The agent half-closed its side of the stream in turn.
    expect(ctx.stream.writableEnded).toBe(true);
  });

  it("pauses the backend socket while the server stream is backed up", async () => {
    const chunk = Buffer.alloc(64 * 1024, 1);
    const be = await backend((s) => {
      // Write until the agent stops reading; the kernel buffers then fill up.
      const pump = () => {
        while (s.writable && s.write(chunk));
      };
      s.on("drain", pump);
      pump();
    });
    const ctx = setup({ holdWrites: true });
    ctx.deliver(dialRequest(`127.0.0.1:${be.port}`, 1n));
    const agentSocket = await vi.waitFor(() => ctx.agentSockets[0] ?? Promise.reject(new Error("waiting")));
    await vi.waitFor(() => expect(agentSocket.isPaused()).toBe(true));
    const sentWhilePaused = ctx.sent.length;
    ctx.releaseWrites();
    await vi.waitFor(() => expect(ctx.sent.length).toBeGreaterThan(sentWhilePaused + 20));
  });

  it("stops reading the server stream while a backend is not reading", async () => {
    let backendSocket: Socket | undefined;
    const be = await backend((s) => {
      backendSocket = s;
      s.pause();
    });
    const ctx = setup();
    const id = await dialOk(ctx, be.port, 1n);
    const chunk = Buffer.alloc(256 * 1024, 2);
    // Feed DATA until the agent stops reading the stream (kernel buffers are finite).
    for (let i = 0; i < 400 && !ctx.stream.isPaused(); i++) {
      ctx.deliver(dataPacket(id, chunk));
      await new Promise((r) => setImmediate(r));
    }
    expect(ctx.stream.isPaused()).toBe(true);
    backendSocket!.resume();
    await vi.waitFor(() => expect(ctx.stream.isPaused()).toBe(false));
  });
});

describe("parseDialTarget", () => {
  it.each([
    ["127.0.0.1:80", { host: "127.0.0.1", port: 80 }],
    ["[::1]:8443", { host: "::1", port: 8443 }],
    ["kubernetes.default.svc:443", { host: "kubernetes.default.svc", port: 443 }],
    [":10250", { host: "localhost", port: 10250 }],
  ])("parses %s", (address, target) => {
    expect(parseDialTarget("tcp", address)).toEqual({ ok: true, target });
  });

  it.each([
    ["host", "missing port"],
    ["::1:80", "too many colons"],
    ["[::1]80", "missing port"],
    ["[::1:80", "missing ']'"],
    ["h:http", 'invalid port "http"'],
    ["h:0", 'invalid port "0"'],
    ["h:70000", 'invalid port "70000"'],
  ])("refuses %s", (address, why) => {
    expect(parseDialTarget("tcp", address)).toEqual({
      ok: false,
      error: `dial tcp ${address}: address ${why}`,
    });
  });
});

/**
 * The destination policy runs between resolution and connect. Every socket factory here returns
 * a socket that never connects, so that even a broken check could not send a packet to a
 * link-local address; `attempts` records what would have been dialed.
 */
describe("BackendDialer destination policy", () => {
  function guarded(opts: Parameters<typeof setup>[0] = {}) {
    const attempts: ResolvedTarget[] = [];
    const ctx = setup({
      dialTimeoutMs: 60_000,
      ...opts,
      connectSocket: (t) => {
        attempts.push(t);
        return new Socket();
      },
    });
    return { ...ctx, attempts };
  }
  const refusals = async (ctx: ReturnType<typeof setup>) =>
    (await ctx.metrics.destinationRefusals.get()).values.map((v) => ({ labels: v.labels, value: v.value }));

  it("refuses a name that resolves to a link-local address, before any connect", async () => {
    const ctx = guarded();
    ctx.deliver(dialRequest("metadata.test:80", 1n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp).toMatchObject({ random: 1n, connectId: 0n });
    expect(rsp.error).toBe(
      "dial tcp metadata.test:80: destination not allowed: metadata.test resolves to 169.254.169.254, which is link-local (cloud instance metadata and credentials live there); the agent refuses it unless started with --allow-link-local-destinations",
    );
    expect(ctx.attempts).toEqual([]);
    expect(ctx.dialer.load).toBe(0);
    // The server types it from the text: CONNECT 403, gRPC PERMISSION_DENIED.
    expect(agentDialError(rsp.error).code).toBe("ERR_DESTINATION_NOT_ALLOWED");
    expect(await refusals(ctx)).toEqual([{ labels: { rule: "link_local" }, value: 1 }]);
    expect((await ctx.metrics.endpointDialFailures.get()).values).toEqual([]);
  });

  it.each([
    ["169.254.169.254:80", "169.254.169.254 is link-local"],
    ["[::ffff:169.254.169.254]:80", "::ffff:169.254.169.254 is link-local"],
    ["[fe80::1]:10250", "fe80::1 is link-local"],
    ["[fd00:ec2::254]:80", "fd00:ec2::254 is the AWS instance metadata service"],
    ["mixed.test:443", "mixed.test resolves to ::ffff:169.254.169.254, which is link-local"],
  ])("refuses %s without dialing", async (address, why) => {
    const ctx = guarded();
    ctx.deliver(dialRequest(address, 2n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp.error).toContain(`dial tcp ${address}: destination not allowed: ${why}`);
    expect(ctx.attempts).toEqual([]);
  });

  it("dials link-local addresses when the policy allows them, and only the addresses it checked", async () => {
    const ctx = guarded({ destinationPolicy: dropInDestinationPolicy({ allowLinkLocal: true }) });
    ctx.deliver(dialRequest("metadata.test:80", 3n));
    await vi.waitFor(() => expect(ctx.attempts).toHaveLength(1));
    expect(ctx.attempts[0]).toEqual({
      host: "metadata.test",
      port: 80,
      addresses: [{ address: "169.254.169.254", family: 4 }],
    });
    ctx.deliver(closeDial(3n)); // the socket never connects; let the dial go
    await vi.waitFor(() => expect(ctx.dialer.load).toBe(0));
    expect(await refusals(ctx)).toEqual([]);
  });

  it("connects to the resolved addresses, not to a second lookup of the name", async () => {
    const be = await backend();
    // backend.test exists only in the test resolver: DNS would not find it.
    const ctx = setup();
    ctx.deliver(dialRequest(`backend.test:${be.port}`, 4n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp.error).toBe("");
    expect(ctx.agentSockets[0]!.remoteAddress).toBe("127.0.0.1");
  });

  it("DIAL_CLS while resolving: the answer is dropped and nothing is dialed", async () => {
    let answer!: (a: ResolvedAddress[]) => void;
    const ctx = guarded({ resolveHost: () => new Promise((resolve) => (answer = resolve)) });
    ctx.deliver(dialRequest("metadata.test:80", 5n));
    await vi.waitFor(() => expect(answer).toBeDefined());
    ctx.deliver(closeDial(5n));
    expect(ctx.dialer.load).toBe(0);
    answer([{ address: "10.0.0.5", family: 4 }]);
    await new Promise((r) => setImmediate(r));
    expect(ctx.attempts).toEqual([]);
    expect(ctx.sent).toEqual([]);
  });

  it("a resolution that outlasts the dial timeout is a timeout", async () => {
    const ctx = guarded({ dialTimeoutMs: 50, resolveHost: () => new Promise(() => {}) });
    ctx.deliver(dialRequest("slow-dns.test:80", 6n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp.error).toBe("dial tcp slow-dns.test:80: i/o timeout");
    expect(ctx.attempts).toEqual([]);
  });

  it("a failed resolution is a dial failure with the resolver's words", async () => {
    const ctx = guarded();
    ctx.deliver(dialRequest("nowhere.test:80", 7n));
    const rsp = await vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));
    expect(rsp.error).toBe("dial tcp nowhere.test:80: getaddrinfo ENOTFOUND nowhere.test");
    expect(agentDialError(rsp.error).code).toBe("ERR_DIAL_FAILED");
    expect(ctx.attempts).toEqual([]);
    expect((await ctx.metrics.endpointDialFailures.get()).values[0]).toMatchObject({
      labels: { reason: "unknown" },
      value: 1,
    });
  });
});

/**
 * A tenant's egress policy arrives with each DIAL_REQ from our server (lib/egress/egress-wire.ts).
 * As above, the sockets here never connect, so no packet can leave for a refused address.
 */
describe("BackendDialer with the tenant's egress policy on the dial", () => {
  const policy = (allow: string[], flags: { allowLoopback?: boolean; allowLinkLocal?: boolean } = {}) =>
    egressWireText(validateEgressPolicy({ allow, allowLoopback: false, allowLinkLocal: false, ...flags }));
  function guarded(opts: Parameters<typeof setup>[0] = {}) {
    const attempts: ResolvedTarget[] = [];
    const ctx = setup({
      dialTimeoutMs: 60_000,
      ...opts,
      connectSocket: (t) => {
        attempts.push(t);
        return new Socket();
      },
    });
    return { ...ctx, attempts };
  }
  const firstResponse = (ctx: ReturnType<typeof setup>) =>
    vi.waitFor(() => dialResponses(ctx.sent)[0] ?? Promise.reject(new Error("waiting")));

  it("refuses a name the policy allows when it resolves to a loopback address: DNS rebinding", async () => {
    const ctx = guarded();
    ctx.deliver(dialRequest("backend.test:80", 1n, "tcp", policy(["*", "0.0.0.0/0"])));
    const rsp = await firstResponse(ctx);
    expect(rsp.error).toBe(
      "dial tcp backend.test:80: destination not allowed: backend.test resolves to 127.0.0.1, which is loopback; the tenant's egress policy does not allow loopback destinations",
    );
    expect(agentDialError(rsp.error).code).toBe("ERR_DESTINATION_NOT_ALLOWED");
    expect(ctx.attempts).toEqual([]);
    const refusals = (await ctx.metrics.destinationRefusals.get()).values.map((v) => v.labels.rule);
    expect(refusals).toEqual(["loopback"]);
  });

  it.each([
    [
      "a name no host rule allows",
      "other.test:443",
      ["*.svc.cluster.local:443"],
      "no rule of the tenant's egress policy allows other.test:443",
    ],
    ["a port the rule does not list", "10.0.0.5:80", ["10.0.0.0/8:443"], "allows 10.0.0.5:80"],
    [
      "an address outside the CIDRs a name must resolve into",
      "mixed.test:443",
      ["*", "192.0.2.0/24"],
      "::ffff:169.254.169.254, which is link-local",
    ],
  ])("refuses %s before any connect", async (_name, address, allow, why) => {
    const ctx = guarded();
    ctx.deliver(dialRequest(address, 2n, "tcp", policy(allow)));
    expect((await firstResponse(ctx)).error).toContain(why);
    expect(ctx.attempts).toEqual([]);
  });

  it("a policy it cannot read refuses the dial and keeps the stream", async () => {
    const ctx = guarded();
    ctx.deliver(dialRequest("10.0.0.5:443", 3n, "tcp", '{"allow":["10.0.0.0/99"]'));
    expect((await firstResponse(ctx)).error).toContain("destination not allowed: egress policy is not JSON");
    ctx.deliver(dialRequest("10.0.0.5:443", 4n, "tcp", policy(["10.0.0.0/8"])));
    await vi.waitFor(() => expect(ctx.attempts).toHaveLength(1));
    ctx.deliver(closeDial(4n));
  });

  it("dials what the policy allows, to the addresses it checked; the agent's own policy still applies", async () => {
    const ctx = guarded();
    ctx.deliver(dialRequest("unreachable.invalid:443", 5n, "tcp", policy(["*:443", "192.0.2.0/24"])));
    await vi.waitFor(() => expect(ctx.attempts).toHaveLength(1));
    expect(ctx.attempts[0]!.addresses).toEqual([{ address: "192.0.2.1", family: 4 }]);
    ctx.deliver(closeDial(5n));
    // The tenant allows link-local; the agent was not started with --allow-link-local-destinations.
    ctx.deliver(dialRequest("metadata.test:80", 6n, "tcp", policy(["*"], { allowLinkLocal: true })));
    const rsp = await firstResponse(ctx);
    expect(rsp.error).toContain("unless started with --allow-link-local-destinations");
    expect(ctx.attempts).toHaveLength(1);
  });

  it("a loopback backend is dialed when the tenant allows loopback", async () => {
    const be = await backend();
    const ctx = setup();
    ctx.deliver(dialRequest(`backend.test:${be.port}`, 7n, "tcp", policy(["*"], { allowLoopback: true })));
    expect((await firstResponse(ctx)).error).toBe("");
  });
});
