/**
 * A Node client for the Konnectivity frontend, the counterpart of upstream's Go
 * konnectivity-client: each dial opens its own ProxyService.Proxy stream (as kube-apiserver's
 * single-use tunnels do) and resolves to a Duplex carrying the connection's bytes.
 */
import { randomBytes } from "node:crypto";
import { Duplex } from "node:stream";
import {
  type ChannelCredentials,
  type ChannelOptions,
  Client,
  type ClientDuplexStream,
  Metadata,
} from "@grpc/grpc-js";
import { ConnectionBrokenError, DialFailedError, DialTimeoutError } from "../errors.js";
import { decodePacket, encodePacket } from "../proto/codec.js";
import {
  closeDial,
  closeRequest,
  dataPacket,
  dialRequest,
  type Packet,
  PacketType,
} from "../proto/packet.js";
import { WAN_CHANNEL_OPTIONS } from "../transport/grpc/windows.js";

type Call = ClientDuplexStream<Packet, Packet>;

/** How long `dial` waits for DIAL_RSP unless told otherwise; mirrors the server default. */
export const DEFAULT_CLIENT_DIAL_TIMEOUT_MS = 30_000;

/**
 * A tunneled connection. Ending it sends CLOSE_REQ; the peer closing ends the readable side, or
 * destroys the socket with ConnectionBrokenError when the connection broke.
 */
export class TunnelSocket extends Duplex {
  constructor(
    private readonly call: Call,
    readonly connectId: bigint,
  ) {
    super({ allowHalfOpen: false });
    call.on("data", (p: Packet) => {
      if (p.type === PacketType.DATA && p.connectId === connectId) {
        if (!this.push(p.data)) call.pause();
      } else if (p.type === PacketType.CLOSE_RSP && p.connectId === connectId) {
        // With error text the connection broke (its agent went away, its backend failed): an
        // error, not an end, so a reader cannot take a truncated transfer for a complete one.
        if (p.error) {
          call.end();
          this.destroy(new ConnectionBrokenError(p.error));
          return;
        }
        this.push(null);
        call.end();
      }
    });
    call.on("end", () => this.push(null));
    call.on("error", (err) => this.destroy(err));
  }

  override _read(): void {
    this.call.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.call.write(dataPacket(this.connectId, chunk))) cb();
    else this.call.once("drain", () => cb());
  }

  override _final(cb: (err?: Error | null) => void): void {
    // When the peer closed first (CLOSE_RSP), our side of the call is already ended, and
    // allowHalfOpen: false brings us here right after: nothing left to tell the server.
    if (!this.call.writableEnded) this.call.write(closeRequest(this.connectId));
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    if (!this.call.writableEnded) {
      this.call.write(closeRequest(this.connectId));
      this.call.end();
    }
    // Only a failure resets the stream. A clean close lets the server finish the call: a client
    // that cancels (RST_STREAM) every stream it is done with trips HTTP/2 rapid-reset protection
    // and gets its whole channel closed after about a thousand quick tunnels. A broken
    // connection is over at the server already (it sent CLOSE_RSP): the call ends cleanly too, or
    // an agent lost with many tunnels would reset as many streams at once.
    if (err && !(err instanceof ConnectionBrokenError)) this.call.cancel();
    cb(err);
  }
}

export class TunnelClient {
  private readonly client: Client;

  constructor(target: string, credentials: ChannelCredentials, options: ChannelOptions = {}) {
    this.client = new Client(target, credentials, { ...WAN_CHANNEL_OPTIONS, ...options });
  }

  dial(address: string, opts: { timeoutMs?: number } = {}): Promise<TunnelSocket> {
    const timeoutMs = opts.timeoutMs ?? DEFAULT_CLIENT_DIAL_TIMEOUT_MS;
    const call: Call = this.client.makeBidiStreamRequest(
      "/ProxyService/Proxy",
      encodePacket,
      decodePacket,
      new Metadata(),
    );
    // Upstream uses a random int63 per dial; only this stream ever sees it.
    const random = randomBytes(8).readBigInt64BE() & 0x7fff_ffff_ffff_ffffn;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        call.write(closeDial(random));
        fail(new DialTimeoutError(timeoutMs));
      }, timeoutMs);
      const fail = (err: Error) => {
        clearTimeout(timer);
        call.removeAllListeners("data");
        call.on("error", () => {});
        call.cancel();
        reject(err);
      };
      const onData = (p: Packet) => {
        if (p.type !== PacketType.DIAL_RSP || p.random !== random) return;
        clearTimeout(timer);
        call.off("data", onData);
        call.off("error", fail);
        if (p.error) {
          fail(new DialFailedError(p.error));
          return;
        }
        call.pause();
        resolve(new TunnelSocket(call, p.connectId));
      };
      call.on("data", onData);
      call.once("error", fail);
      call.write(dialRequest(address, random));
    });
  }

  close(): void {
    this.client.close();
  }
}
