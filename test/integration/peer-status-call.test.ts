/**
 * The client side of kgw.fleet.Peer/Status against peers that misbehave, on a plain HTTP/2
 * server on loopback: one that never answers (timeout), one that announces a slice over the
 * limit (refused before it is read), one that sends something that is not a slice, one that
 * refuses the call, one that resets it. Each comes back as the reason the status API shows;
 * none rejects or hangs.
 */
import {
  type ClientHttp2Session,
  connect,
  createServer,
  type Http2Server,
  type ServerHttp2Stream,
} from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  askPeerStatus,
  PEER_STATUS_MAX_BYTES,
  PEER_STATUS_PATH,
} from "../../lib/fleet/peer/peer-status-call.js";

let server: Http2Server;
let session: ClientHttp2Session;
const streams = new Set<ServerHttp2Stream>();

const GRPC = { ":status": 200, "content-type": "application/grpc" };

function message(body: Buffer): Buffer {
  const out = Buffer.alloc(5 + body.length);
  out.writeUInt32BE(body.length, 1);
  body.copy(out, 5);
  return out;
}

beforeAll(async () => {
  server = createServer();
  server.on("stream", (stream, headers) => {
    streams.add(stream);
    stream.on("close", () => streams.delete(stream));
    stream.on("error", () => {});
    expect(headers[":path"]).toBe(PEER_STATUS_PATH);
    switch (decodeURIComponent(String(headers["kgw-peer-origin"]))) {
      case "silent":
        return; // never answers
      case "huge": {
        stream.respond(GRPC);
        const prefix = Buffer.alloc(5);
        prefix.writeUInt32BE(PEER_STATUS_MAX_BYTES + 1, 1);
        stream.write(prefix);
        return;
      }
      case "garbage":
        stream.respond(GRPC, { waitForTrailers: true });
        stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
        stream.end(message(Buffer.from("<html>")));
        return;
      case "refuse":
        stream.respond({ ...GRPC, "grpc-status": "12" }, { endStream: true });
        return;
      case "reset":
        stream.close(2);
        return;
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  session = connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  session.on("error", () => {});
});

afterAll(async () => {
  for (const s of streams) s.close();
  session.close();
  await new Promise<void>((r) => server.close(() => r()));
});

describe("asking a misbehaving peer for its status", () => {
  it("silence: timeout, the stream cancelled", async () => {
    expect(await askPeerStatus(session, "silent", undefined, 200)).toEqual({ failure: "timeout" });
  });

  it("a slice announced over the limit: malformed, refused before it is read", async () => {
    expect(await askPeerStatus(session, "huge", undefined, 5000)).toMatchObject({
      failure: "malformed",
      detail: expect.stringContaining(String(PEER_STATUS_MAX_BYTES + 1)),
    });
  });

  it("not a slice: malformed", async () => {
    expect(await askPeerStatus(session, "garbage", undefined, 5000)).toMatchObject({ failure: "malformed" });
  });

  it("a refusal (an older peer's UNIMPLEMENTED): refused, with the status", async () => {
    expect(await askPeerStatus(session, "refuse", "acme", 5000)).toEqual({
      failure: "refused",
      detail: "grpc-status 12",
    });
  });

  it("a reset: unreachable", async () => {
    expect(await askPeerStatus(session, "reset", undefined, 5000)).toEqual({ failure: "unreachable" });
  });
});
