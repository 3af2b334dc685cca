/**
 * How a gRPC call we serve ends when we fail it (GrpcCallStream.fail): with the error's status in
 * trailers, after whatever was written before it, so that a caller reading its call learns why
 * (UNAUTHENTICATED, not a cancelled call it would retry); only a caller that leaves the queued
 * bytes unread past the flush bound gets a reset instead. Over plain HTTP/2 on loopback, a
 * server stream wrapped as the gateway wraps one; every wait is on an event.
 */
import { once } from "node:events";
import {
  type ClientHttp2Session,
  type ClientHttp2Stream,
  connect,
  constants,
  createServer,
  type Http2Server,
  type ServerHttp2Stream,
} from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CredentialRevokedError, GrpcCode } from "../../lib/errors.js";
import { closeResponse, dataPacket } from "../../lib/proto/packet.js";
import { GrpcCallStream } from "../../lib/transport/grpc/call-stream.js";

let server: Http2Server;
let client: ClientHttp2Session;
/** What the test does with each call the server receives. */
let onCall: (call: GrpcCallStream) => void = () => {};

beforeAll(async () => {
  server = createServer();
  server.on("stream", (stream: ServerHttp2Stream) => {
    const call = new GrpcCallStream(stream, { maxMessageBytes: 1024 * 1024, failFlushMs: 100 });
    call.on("data", () => {});
    onCall(call);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  client = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  await once(client, "connect");
});

afterAll(async () => {
  client.close();
  await new Promise((r) => server.close(r));
});

interface Ended {
  status: string | undefined;
  message: string | undefined;
  rstCode: number | undefined;
  bytes: number;
}

/** Opens a call; resolves with its trailers (or reset) and the bytes read, once it has closed. */
function call(read: boolean): { stream: ClientHttp2Stream; ended: Promise<Ended> } {
  const stream = client.request({
    ":method": "POST",
    ":path": "/ProxyService/Proxy",
    "content-type": "application/grpc",
  });
  stream.on("error", () => {});
  let bytes = 0;
  let trailers: Record<string, unknown> = {};
  stream.on("trailers", (t) => {
    trailers = t;
  });
  if (read) stream.on("data", (d: Buffer) => (bytes += d.length));
  else stream.pause();
  const ended = once(stream, "close").then(() => ({
    status: trailers["grpc-status"] as string | undefined,
    message: trailers["grpc-message"] as string | undefined,
    rstCode: stream.rstCode,
    bytes,
  }));
  return { stream, ended };
}

describe("a call we fail", () => {
  it("ends with its status after the packets written just before it, for a caller that reads", async () => {
    onCall = (c) => {
      // What a credential's revocation finds: CLOSE_RSPs of tunnels cut a moment before, queued.
      for (let i = 1; i <= 20; i++) c.write(closeResponse(BigInt(i), "agent gone"));
      c.write(dataPacket(21n, Buffer.alloc(256 * 1024)));
      c.fail(new CredentialRevokedError("tenant-deleted"));
    };
    const { ended } = call(true);
    const end = await ended;
    expect(end).toMatchObject({
      status: String(GrpcCode.UNAUTHENTICATED),
      rstCode: constants.NGHTTP2_NO_ERROR,
    });
    expect(decodeURIComponent(end.message ?? "")).toContain("(tenant-deleted)");
    expect(end.bytes).toBeGreaterThan(256 * 1024);
  });

  it("is reset once the flush bound passes, for a caller that leaves what was queued unread", async () => {
    onCall = (c) => {
      // More than the caller's stream window (64 KiB): it stays queued while the caller does not read.
      c.write(dataPacket(1n, Buffer.alloc(512 * 1024)));
      c.fail(new CredentialRevokedError("revoked"));
    };
    const { ended } = call(false);
    const end = await ended;
    expect(end).toMatchObject({ status: undefined, rstCode: constants.NGHTTP2_CANCEL });
  });
});
