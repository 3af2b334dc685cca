/**
 * The frontend's gRPC server (lib/transport/grpc/server.ts) against a raw HTTP/2
 * client over mTLS: what a gRPC server owes callers that are not well-behaved gRPC clients, and
 * that each bad call closes only its own stream. Well-behaved clients (grpc-js, and the Go
 * konnectivity-client in test/interop) are covered by the end-to-end suites.
 */

import { mkdtempSync, rmSync } from "node:fs";
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect,
  constants,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
} from "node:http2";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GrpcCode } from "../../lib/errors.js";
import { decodePacket, encodePacket } from "../../lib/proto/codec.js";
import { dataPacket, dialRequest, type Packet, PacketType } from "../../lib/proto/packet.js";
import { waitFor } from "../helpers/agent.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";

let t: TestGateway;
let session: ClientHttp2Session;

function h2Connect(g: TestGateway = t): Promise<ClientHttp2Session> {
  const p = g.pki;
  const s = connect(`https://127.0.0.1:${g.gw.addresses.frontend!.port}`, {
    ca: p.ca.certPem,
    key: p.frontend.keyPem,
    cert: p.frontend.certPem,
    servername: "localhost",
  });
  return new Promise((resolve, reject) => {
    s.once("connect", () => resolve(s));
    s.once("error", reject);
  });
}

beforeAll(async () => {
  t = await startTestGateway(["--frontend-keepalive-time=200ms"]);
  session = await h2Connect();
});

afterAll(async () => {
  session.close();
  await t.gw.close();
});

const PROXY: OutgoingHttpHeaders = {
  ":method": "POST",
  ":path": "/ProxyService/Proxy",
  "content-type": "application/grpc",
  te: "trailers",
};

interface Answer {
  headers: IncomingHttpHeaders;
  trailers: IncomingHttpHeaders;
  body: Buffer;
  /** RST_STREAM code, when the stream was reset. */
  rstCode: number;
}

function message(packet: Packet): Buffer {
  const body = encodePacket(packet);
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

function call(
  headers: OutgoingHttpHeaders,
  s = session,
): { stream: ClientHttp2Stream; answer: Promise<Answer> } {
  const stream = s.request(headers);
  const answer = new Promise<Answer>((resolve) => {
    const a: Answer = { headers: {}, trailers: {}, body: Buffer.alloc(0), rstCode: 0 };
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      a.headers = h;
    });
    stream.on("trailers", (h) => {
      a.trailers = h;
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("error", () => {});
    stream.on("close", () => {
      a.body = Buffer.concat(chunks);
      a.rstCode = stream.rstCode ?? 0;
      resolve(a);
    });
  });
  return { stream, answer };
}

/** The gRPC status of an answer: in the trailers, or in the headers of a trailers-only answer. */
const statusOf = (a: Answer) => Number(a.trailers["grpc-status"] ?? a.headers["grpc-status"]);
const messageOf = (a: Answer) =>
  decodeURIComponent(String(a.trailers["grpc-message"] ?? a.headers["grpc-message"]));

/** Proxy calls the gateway holds open (the upstream metric), to see that ended calls are gone. */
async function openCalls(g: TestGateway = t): Promise<number> {
  const { values } = await g.gw.metrics.grpcConnections.get();
  return values.find((v) => v.labels.service_method === "Proxy")?.value ?? 0;
}

async function noOpenCalls(): Promise<void> {
  const deadline = Date.now() + 5000;
  while ((await openCalls()) !== 0) {
    if (Date.now() > deadline) throw new Error(`still ${await openCalls()} open calls at the gateway`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A valid call on the same session still works: a dial answered (no agent: with an error). */
async function stillServes(headers: OutgoingHttpHeaders = PROXY): Promise<void> {
  const { stream, answer } = call(headers);
  const got: Packet[] = [];
  let buf = Buffer.alloc(0);
  stream.on("data", (c: Buffer) => {
    buf = Buffer.concat([buf, c]);
    while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
      got.push(decodePacket(buf.subarray(5, 5 + buf.readUInt32BE(1))));
      buf = buf.subarray(5 + buf.readUInt32BE(1));
    }
  });
  stream.write(message(dialRequest("127.0.0.1:1", 42n)));
  await waitFor(() => got.length > 0, 5000, "DIAL_RSP");
  expect(got[0]).toMatchObject({ type: PacketType.DIAL_RSP, random: 42n });
  stream.end();
  const a = await answer;
  expect(a.headers[":status"]).toBe(200);
  expect(statusOf(a)).toBe(GrpcCode.OK);
}

describe("the frontend gRPC server", () => {
  it("serves a call with gRPC response headers and an OK status in the trailers", async () => {
    await stillServes();
  });

  it.each([
    ["GET", 405, { ...PROXY, ":method": "GET" }],
    ["a JSON content type", 415, { ...PROXY, "content-type": "application/json" }],
    ["no content type", 415, { ":method": "POST", ":path": "/ProxyService/Proxy" }],
  ])("answers %s with HTTP %i", async (_name, status, headers) => {
    const { stream, answer } = call(headers);
    stream.end();
    expect((await answer).headers[":status"]).toBe(status);
    await stillServes();
  });

  it.each([
    [
      "an unknown method",
      { ...PROXY, ":path": "/AgentService/Connect" },
      GrpcCode.UNIMPLEMENTED,
      /unknown method/,
    ],
    ["gzip encoding", { ...PROXY, "grpc-encoding": "gzip" }, GrpcCode.UNIMPLEMENTED, /grpc-encoding gzip/],
    [
      "a malformed timeout",
      { ...PROXY, "grpc-timeout": "soon" },
      GrpcCode.INTERNAL,
      /malformed grpc-timeout/,
    ],
  ])("refuses %s with a trailers-only answer", async (_name, headers, code, text) => {
    const { stream, answer } = call(headers);
    stream.end();
    const a = await answer;
    expect(a.headers[":status"]).toBe(200);
    expect(Number(a.headers["grpc-status"])).toBe(code);
    expect(messageOf(a)).toMatch(text);
    await stillServes();
  });

  const prefix = (flag: number, length: number) => {
    const b = Buffer.alloc(5);
    b[0] = flag;
    b.writeUInt32BE(length, 1);
    return b;
  };

  it.each([
    ["a compressed message", prefix(1, 3), GrpcCode.UNIMPLEMENTED, /identity encoding only/],
    ["an invalid message flag", prefix(7, 3), GrpcCode.INVALID_ARGUMENT, /invalid gRPC message flag 7/],
    [
      "a message over 16 MiB, before its bytes arrive",
      prefix(0, 16 * 1024 * 1024 + 1),
      GrpcCode.RESOURCE_EXHAUSTED,
      /larger than the limit/,
    ],
    [
      "a message that is not a Packet",
      Buffer.concat([prefix(0, 2), Buffer.from([0xff, 0xff])]),
      GrpcCode.INVALID_ARGUMENT,
      /./,
    ],
  ])("ends a call that sends %s with a status, and keeps the session", async (_name, bytes, code, text) => {
    const { stream, answer } = call(PROXY);
    stream.write(bytes); // and the client keeps its side open: the server ends the call
    const a = await answer;
    expect(a.headers[":status"]).toBe(200);
    expect(statusOf(a)).toBe(code);
    expect(messageOf(a)).toMatch(text);
    expect(a.rstCode).toBe(constants.NGHTTP2_NO_ERROR);
    await noOpenCalls();
    await stillServes();
  });

  it("releases a call it ended while the caller keeps sending (the rest is read and dropped)", async () => {
    const { stream, answer } = call(PROXY);
    stream.on("error", () => {});
    stream.write(prefix(0, 16 * 1024 * 1024 + 1));
    // The body of the refused message keeps coming, as a grpc-go client would send it.
    for (let i = 0; i < 32; i++) stream.write(Buffer.alloc(64 * 1024, i));
    const a = await answer;
    expect(statusOf(a)).toBe(GrpcCode.RESOURCE_EXHAUSTED);
    await noOpenCalls();
    await stillServes();
  });

  it("ends a call that half-closes in the middle of a message with a status", async () => {
    const { stream, answer } = call(PROXY);
    stream.end(Buffer.concat([prefix(0, 100), Buffer.alloc(10)]));
    const a = await answer;
    expect(statusOf(a)).toBe(GrpcCode.INVALID_ARGUMENT);
    expect(messageOf(a)).toMatch(/middle of a message/);
  });

  it("keeps serving other calls while one sends a message slowly", async () => {
    const slow = call(PROXY);
    slow.stream.write(prefix(0, 1000));
    slow.stream.write(Buffer.alloc(10));
    await stillServes();
    slow.stream.close(constants.NGHTTP2_CANCEL);
    await slow.answer;
  });

  it("ends a call at its grpc-timeout with DEADLINE_EXCEEDED", async () => {
    const started = Date.now();
    const { answer } = call({ ...PROXY, "grpc-timeout": "300m" });
    const a = await answer;
    expect(statusOf(a)).toBe(GrpcCode.DEADLINE_EXCEEDED);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await noOpenCalls();
  });

  it("releases a call whose deadline passes while the caller is sending and being answered", async () => {
    const { stream, answer } = call({ ...PROXY, "grpc-timeout": "200m" });
    stream.on("error", () => {});
    // DATA for a connection that does not exist: each one is answered with a CLOSE_RSP.
    const timer = setInterval(() => {
      if (!stream.closed) stream.write(message(dataPacket(7n, Buffer.alloc(1024))));
    }, 5);
    await answer;
    clearInterval(timer);
    await noOpenCalls();
  });

  it("takes a deadline beyond what a Node timer can hold (grpc-go sends 30 days as 2592000S)", async () => {
    await stillServes({ ...PROXY, "grpc-timeout": "2592000S" });
  });

  it("sends keepalive PINGs at --frontend-keepalive-time", async () => {
    const s = await h2Connect();
    let pings = 0;
    s.on("ping", () => {
      pings++;
    });
    await waitFor(() => pings >= 2, 3000, "two keepalive PINGs");
    s.close();
  });

  it("sends GOAWAY on graceful shutdown, then cancels calls that hold no tunnel", async () => {
    // Calls with open tunnels are let finish (lifecycle.test.ts); this one has none.
    const g = await startTestGateway(["--graceful-shutdown-timeout=1s"]);
    const s = await h2Connect(g);
    const goaway = new Promise<number>((resolve) => s.once("goaway", (code) => resolve(code)));
    const { stream, answer } = call(PROXY, s);
    await new Promise((r) => stream.once("response", r));
    await g.gw.shutdown();
    expect(await goaway).toBe(constants.NGHTTP2_NO_ERROR);
    expect((await answer).rstCode).toBe(constants.NGHTTP2_CANCEL);
    s.destroy();
  });

  it("takes a Go client's closing GOAWAY, which names its own stream, as a normal close", async () => {
    // grpc-go (kube-apiserver's konnectivity-client, over the Unix socket) ends a connection with
    // a GOAWAY whose last-stream-ID is a stream it opened (golang/go#80759); nghttp2 calls that
    // a protocol error. Node's client never sends such a frame, so it is written onto the wire
    // beside it.
    const dir = mkdtempSync(join(tmpdir(), "kgw-goaway-"));
    const uds = join(dir, "frontend.sock");
    const g = await startTestGateway([`--uds-name=${uds}`]);
    const raw = netConnect(uds);
    await new Promise((r) => raw.once("connect", r));
    // A JS stream between Node's HTTP/2 client and the socket, so bytes can be added beside it.
    const wire = new Duplex({
      write(chunk, _enc, cb) {
        raw.write(chunk, cb);
      },
      read() {
        raw.resume();
      },
    });
    raw.on("data", (d) => {
      if (!wire.push(d)) raw.pause();
    });
    raw.on("end", () => wire.push(null));
    raw.on("error", () => {});
    const s = connect("http://localhost", { createConnection: () => wire });
    s.on("error", () => {});
    const { stream } = call(PROXY, s);
    stream.on("error", () => {});
    await new Promise((r) => stream.once("response", r));
    const before = g.logs.length;
    const goaway = Buffer.alloc(9 + 8);
    goaway.writeUIntBE(8, 0, 3); // length
    goaway[3] = 0x7; // GOAWAY
    goaway.writeUInt32BE(1, 9); // last-stream-ID: the client's own stream 1
    goaway.writeUInt32BE(constants.NGHTTP2_NO_ERROR, 13);
    raw.write(goaway);
    await waitFor(async () => (await openCalls(g)) === 0, 5000, "the call closed");
    const closedByPeer = () => g.logs.slice(before).some((l) => l.includes("closed by the peer"));
    await waitFor(closedByPeer, 2000, "the close logged as the peer's");
    s.destroy();
    raw.destroy();
    const logged = g.logs
      .slice(before)
      .map((l) => JSON.parse(l) as { msg: string; how?: string; level: string });
    await g.gw.close();
    rmSync(dir, { recursive: true, force: true });
    expect(logged.filter((l) => /error/i.test(l.msg))).toEqual([]);
    expect(logged.filter((l) => l.msg === "HTTP/2 connection closed by the peer")).toEqual([
      expect.objectContaining({ how: "peer ended HTTP/2 with an invalid frame", level: "debug" }),
    ]);
  });
});
