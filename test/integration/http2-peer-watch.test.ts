/**
 * Http2PeerWatch against real HTTP/2 sessions and real peer processes: killed while we write to
 * them (the case Node's HTTP/2 never reports), frozen, and alive but quiet; and the sessions of
 * our gRPC server watched on every kind of transport it is handed.
 */
import { type ChildProcess, fork } from "node:child_process";
import {
  createServer as createHttp2Server,
  type Http2Session,
  connect as http2Connect,
  type ServerHttp2Stream,
} from "node:http2";
import { type AddressInfo, createServer as createNetServer } from "node:net";
import { createServer as createTlsServer, type TLSSocket, type Server as TlsServer } from "node:tls";
import { fileURLToPath } from "node:url";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { GrpcServer } from "../../lib/transport/grpc/server.js";
import {
  Http2PeerWatch,
  type PeerActivity,
  type PeerGoneReason,
} from "../../lib/transport/http2-peer-watch.js";
import { tcpPeerGone } from "../../lib/transport/node-internals.js";
import { PrefixedDuplex } from "../../lib/transport/prefixed-duplex.js";
import { waitFor } from "../helpers/agent.js";
import { captureLogger } from "../helpers/gateway.js";
import { getTestPki, type TestPki } from "../helpers/pki.js";

const PEER = fileURLToPath(new URL("../helpers/h2-download-peer.ts", import.meta.url));
const CHUNK = Buffer.alloc(64 * 1024, 7);

let pki: TestPki;
beforeAll(async () => {
  pki = await getTestPki();
});

interface Harness {
  server: TlsServer;
  port: number;
  watch: Http2PeerWatch;
  closedBy: PeerGoneReason[];
  sessions: Http2Session[];
  children: ChildProcess[];
}

let h: Harness | undefined;

/**
 * A TLS HTTP/2 server that answers every stream with an endless download, sessions watched;
 * with `reported`, the server reports its writes as our gRPC server does.
 */
async function start(answerMs: number, reported = false): Promise<Harness> {
  const activity = new WeakMap<Http2Session, PeerActivity>();
  const closedBy: PeerGoneReason[] = [];
  const watch = new Http2PeerWatch({
    tickMs: 50,
    stallMs: 100,
    answerMs,
    disconnected: tcpPeerGone,
    onClosed: (reason) => closedBy.push(reason),
  });
  const sessions: Http2Session[] = [];
  const h2 = createHttp2Server();
  h2.on("session", (s) => {
    sessions.push(s);
    s.on("error", () => {});
  });
  h2.on("stream", (stream: ServerHttp2Stream) => {
    stream.on("error", () => {});
    stream.respond({ ":status": 200 });
    const pump = () => {
      if (stream.session) activity.get(stream.session)?.active();
      while (!stream.destroyed && stream.write(CHUNK));
    };
    stream.on("drain", pump);
    pump();
  });
  const server = createTlsServer(
    { key: pki.server.keyPem, cert: pki.server.certPem, ALPNProtocols: ["h2"] },
    (socket: TLSSocket) => {
      h2.emit("connection", socket);
      const session = sessions.at(-1)!;
      activity.set(session, watch.watch(session, socket, { activityReported: reported }));
    },
  );
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  h = { server, port: (server.address() as AddressInfo).port, watch, closedBy, sessions, children: [] };
  return h;
}

/** A peer process downloading from the harness; resolves once bytes flow. */
async function downloadingPeer(t: Harness): Promise<ChildProcess> {
  const child = fork(PEER, [String(t.port), pki.files.caCert], {
    execArgv: ["--import", "tsx"],
    stdio: ["ignore", "ignore", "ignore", "ipc"],
  });
  t.children.push(child);
  await new Promise<void>((resolve, reject) => {
    child.once("message", () => resolve());
    child.once("exit", (code) => reject(new Error(`peer exited (${code}) before receiving`)));
  });
  return child;
}

function closed(session: Http2Session): boolean {
  return session.closed || session.destroyed;
}

afterEach(async () => {
  if (!h) return;
  const t = h;
  h = undefined;
  for (const c of t.children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  for (const s of t.sessions) if (!s.destroyed) s.destroy();
  await new Promise<void>((r) => t.server.close(() => r()));
  // Nothing of the watch outlives its sessions: no entries, and (checked by vitest's handle
  // accounting in other files) no interval left behind.
  await waitFor(() => t.watch.size === 0, 2000, "watch emptied");
  t.watch.close();
});

describe("Http2PeerWatch", () => {
  it("closes sessions whose peer was killed while we were sending to it", async () => {
    const t = await start(20_000);
    // Node.js 20 leaves most of these sessions open forever without the watch (7-10 of 10 here);
    // Node.js 24 (24.22.3) closes them itself, before the watch looks. Either way each must close.
    for (let i = 0; i < 5; i++) {
      const peer = await downloadingPeer(t);
      const session = t.sessions.at(-1)!;
      const killedAt = Date.now();
      peer.kill("SIGKILL");
      await waitFor(() => closed(session), 3000, `session ${i} closed after its peer was killed`);
      // Certain from the socket, so well before the 20 s a PING would be given.
      expect(Date.now() - killedAt).toBeLessThan(2000);
    }
    // Those the watch closed, it closed as certain from the socket, not by a PING left unanswered.
    expect(t.closedBy.every((r) => r === "connection reset")).toBe(true);
  });

  it("with activity reported, leaves idle sessions off its tick and still closes a killed peer's", async () => {
    const t = await start(20_000, true);
    const idle = http2Connect(`https://localhost:${t.port}`, { ca: pki.ca.certPem });
    idle.on("error", () => {});
    await waitFor(() => t.watch.size === 1, 3000, "idle session watched");
    // Its SETTINGS exchanged, nothing outstanding: off the tick, so idle sessions cost nothing.
    await waitFor(() => t.watch.armedSize === 0, 3000, "idle session left the tick");
    for (let i = 0; i < 3; i++) {
      const peer = await downloadingPeer(t);
      const session = t.sessions.at(-1)!;
      const killedAt = Date.now();
      peer.kill("SIGKILL");
      await waitFor(() => closed(session), 3000, `session ${i} closed after its peer was killed`);
      expect(Date.now() - killedAt).toBeLessThan(2000);
    }
    expect(t.closedBy.every((r) => r === "connection reset")).toBe(true);
    expect(closed(t.sessions[0]!)).toBe(false);
    await waitFor(() => t.watch.armedSize === 0, 3000, "the idle session still off the tick");
    idle.destroy();
  });

  it("closes the session of a frozen peer that no longer answers PINGs", async () => {
    const t = await start(500);
    const peer = await downloadingPeer(t);
    const session = t.sessions.at(-1)!;
    peer.kill("SIGSTOP");
    await waitFor(() => closed(session), 5000, "frozen peer's session closed");
    expect(t.closedBy).toEqual(["no PING answer"]);
  });

  it("leaves a live peer alone: it answers the PING and is not asked again while quiet", async () => {
    const t = await start(300);
    const client = http2Connect(`https://localhost:${t.port}`, { ca: pki.ca.certPem });
    let pings = 0;
    client.on("ping", () => pings++);
    // Read a little, then stop reading: the server fills the stream window and goes quiet,
    // the peer says nothing either.
    const stream = client.request({ ":path": "/" });
    await new Promise<void>((r) => stream.once("data", () => r()));
    stream.pause();
    await waitFor(() => pings >= 1, 3000, "the quiet peer was asked");
    // Several answer deadlines later it is still open and was asked only once.
    const askedAt = Date.now();
    await waitFor(() => Date.now() - askedAt > 1500, 3000, "time passing");
    expect(closed(t.sessions.at(-1)!)).toBe(false);
    expect(t.closedBy).toEqual([]);
    expect(pings).toBe(1);
    stream.destroy();
    await new Promise<void>((r) => client.close(() => r()));
  });

  it("watches our gRPC server's sessions, on sockets and on sniffed streams alike", async () => {
    const watch = new Http2PeerWatch({ tickMs: 50, stallMs: 100, answerMs: 1000 });
    const grpcServer = new GrpcServer({
      methods: {},
      maxMessageBytes: 1024,
      keepaliveMs: 0,
      keepaliveTimeoutMs: 0,
      firstCallTimeoutMs: 0,
      onSession: (session, transport) => watch.watch(session, transport),
      log: captureLogger().log,
    });
    let n = 0;
    const server = createNetServer((socket) => {
      // The second connection arrives the way a sniffed Unix-socket caller does.
      grpcServer.accept(n++ === 0 ? socket : new PrefixedDuplex(socket, Buffer.alloc(0)));
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const first = http2Connect(url);
    await waitFor(() => watch.size === 1, 3000, "first session watched");
    const second = http2Connect(url);
    await waitFor(() => watch.size === 2, 3000, "sniffed session watched");
    first.destroy();
    second.destroy();
    await waitFor(() => watch.size === 0, 3000, "both forgotten once closed");
    watch.close();
    grpcServer.close();
    await new Promise<void>((r) => server.close(() => r()));
  });
});
