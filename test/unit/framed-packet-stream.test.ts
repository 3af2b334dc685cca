import { once } from "node:events";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { dataPacket, dialRequest, type Packet, PacketType } from "../../lib/proto/packet.js";
import { encodeDataHeader, FrameDecoder, FrameType } from "../../lib/proto/tunnel-frames.js";
import { FramedPacketStream, KeepaliveTimeoutError } from "../../lib/transport/framed-packet-stream.js";
import { waitFor } from "../helpers/agent.js";

const servers: Server[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** Two ends of one loopback TCP connection. */
async function socketPair(): Promise<[Socket, Socket]> {
  const server = createServer();
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const accepted = once(server, "connection");
  const a = connect((server.address() as AddressInfo).port, "127.0.0.1");
  const [b] = (await accepted) as [Socket];
  await once(a, "connect");
  sockets.push(a, b);
  for (const s of [a, b]) s.on("error", () => {});
  return [a, b];
}

const noKeepalive = { keepaliveMs: 0, keepaliveTimeoutMs: 0 };

function collect(stream: FramedPacketStream): Packet[] {
  const got: Packet[] = [];
  stream.on("data", (p: Packet) => got.push(p));
  return got;
}

describe("FramedPacketStream", () => {
  it("carries DATA and other packets both ways, DATA bytes intact", async () => {
    const [a, b] = await socketPair();
    const left = new FramedPacketStream(a, new FrameDecoder(), noKeepalive);
    const right = new FramedPacketStream(b, new FrameDecoder(), noKeepalive);
    const got = collect(right);
    const payload = Buffer.alloc(300_000, 0x5a);
    left.write(dialRequest("10.0.0.1:443", 7n));
    left.write(dataPacket(3n, payload));
    left.write(dataPacket(3n, Buffer.from("x"), "backend reset"));
    await waitFor(() => {
      const bytes = got.filter((p) => p.type === PacketType.DATA && p.error === "");
      return (
        bytes.reduce((n, p) => n + (p as { data: Uint8Array }).data.byteLength, 0) === payload.byteLength
      );
    });
    expect(got[0]).toMatchObject({ type: PacketType.DIAL_REQ, address: "10.0.0.1:443", random: 7n });
    const data = Buffer.concat(
      got.flatMap((p) => (p.type === PacketType.DATA && p.error === "" ? [p.data as Buffer] : [])),
    );
    expect(data.equals(payload)).toBe(true);
    await waitFor(() => got.some((p) => p.type === PacketType.DATA && p.error === "backend reset"));
  });

  it("holds packets that arrive before the owner listens, including those read with the handshake", async () => {
    const [a, b] = await socketPair();
    const left = new FramedPacketStream(a, new FrameDecoder(), noKeepalive);
    // What a handshake reader may have taken off the socket together with WELCOME.
    const early = new FrameDecoder();
    early.push(Buffer.concat([encodeDataHeader(1n, 1), Buffer.from("a")]));
    const right = new FramedPacketStream(b, early, noKeepalive);
    left.write(dataPacket(2n, Buffer.from("b")));
    // The owner attaches late: only once the packet has been read off the socket.
    await waitFor(() => b.bytesRead > 0);
    const got = collect(right);
    await waitFor(() => got.length === 2);
    expect(got.map((p) => (p.type === PacketType.DATA ? p.connectId : -1n))).toEqual([1n, 2n]);
  });

  it("stops delivering at once when paused, even within a chunk, and resumes in order", async () => {
    const [a, b] = await socketPair();
    const left = new FramedPacketStream(a, new FrameDecoder(), noKeepalive);
    const right = new FramedPacketStream(b, new FrameDecoder(), noKeepalive);
    const got: bigint[] = [];
    right.on("data", (p: Packet) => {
      if (p.type !== PacketType.DATA) return;
      got.push(p.connectId);
      if (got.length === 1) right.pause();
    });
    a.cork();
    for (let i = 1n; i <= 5n; i++) left.write(dataPacket(i, Buffer.from("y")));
    a.uncork();
    await waitFor(() => got.length === 1);
    await new Promise((r) => setImmediate(r));
    expect(got).toEqual([1n]);
    right.resume();
    await waitFor(() => got.length === 5);
    expect(got).toEqual([1n, 2n, 3n, 4n, 5n]);
  });

  it("emits end only after every packet sent before the FIN", async () => {
    const [a, b] = await socketPair();
    const left = new FramedPacketStream(a, new FrameDecoder(), noKeepalive);
    const right = new FramedPacketStream(b, new FrameDecoder(), noKeepalive);
    const events: string[] = [];
    right.on("data", () => {
      events.push("data");
      right.pause();
      setTimeout(() => right.resume(), 20);
    });
    right.on("end", () => events.push("end"));
    left.write(dataPacket(1n, Buffer.from("a")));
    left.write(dataPacket(2n, Buffer.from("b")));
    left.end();
    await waitFor(() => events.includes("end"));
    expect(events).toEqual(["data", "data", "end"]);
  });

  it("answers PINGs, and declares a silent peer dead after the keepalive timeout", async () => {
    const [a, b] = await socketPair();
    // b is a peer that reads but never answers anything.
    const seen = new FrameDecoder();
    const types: number[] = [];
    b.on("data", (c: Buffer) => {
      seen.push(c);
      for (let f = seen.next(); f; f = seen.next()) if (f.kind === "frame") types.push(f.type);
    });
    const stream = new FramedPacketStream(a, new FrameDecoder(), {
      keepaliveMs: 50,
      keepaliveTimeoutMs: 100,
    });
    const errors: Error[] = [];
    stream.on("error", (e: Error) => errors.push(e));
    const started = Date.now();
    await new Promise((r) => stream.once("close", r));
    expect(types).toContain(FrameType.PING);
    expect(errors[0]).toBeInstanceOf(KeepaliveTimeoutError);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it("stays up while the peer answers its pings", async () => {
    const [a, b] = await socketPair();
    const left = new FramedPacketStream(a, new FrameDecoder(), { keepaliveMs: 30, keepaliveTimeoutMs: 60 });
    left.on("data", () => {});
    // Answers PING with PONG once it is read, like any owner reads it.
    new FramedPacketStream(b, new FrameDecoder(), noKeepalive).on("data", () => {});
    const pings = { n: 0 };
    const write = a.write.bind(a);
    a.write = ((chunk: Buffer, ...rest: never[]) => {
      if (chunk[0] === FrameType.PING) pings.n++;
      return write(chunk, ...rest);
    }) as typeof a.write;
    await waitFor(() => pings.n >= 4, 2000, "four keepalive rounds");
    expect(left.destroyed).toBe(false);
  });

  it("closes on a framing error instead of guessing", async () => {
    const [a, b] = await socketPair();
    const stream = new FramedPacketStream(b, new FrameDecoder(), noKeepalive);
    const errors: Error[] = [];
    stream.on("error", (e: Error) => errors.push(e));
    stream.on("data", () => {});
    a.write(Buffer.from([FrameType.HELLO, 0, 0, 0, 2, 0x7b, 0x7d]));
    await new Promise((r) => stream.once("close", r));
    expect(errors[0]?.message).toMatch(/handshake frame type 1 after the handshake/);
  });
});
