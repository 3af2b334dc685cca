import type { Socket } from "node:net";
import { Duplex } from "node:stream";

/**
 * A socket with bytes already read from it put back in front. Used when protocol sniffing has
 * consumed the start of an HTTP/2 connection preface on a connection without ALPN (Unix socket,
 * plaintext): Node's HTTP/2 reads from the native handle and would never see bytes returned with
 * `unshift`, so it gets this stream instead (Node wraps non-native duplexes itself).
 */
export class PrefixedDuplex extends Duplex {
  constructor(
    private readonly inner: Duplex,
    prefix: Buffer,
  ) {
    super({ allowHalfOpen: true });
    this.push(prefix);
    inner.on("data", (chunk: Buffer) => {
      if (!this.push(chunk)) inner.pause();
    });
    inner.on("end", () => this.push(null));
    inner.on("error", (err) => this.destroy(err));
    inner.on("close", () => this.destroy());
    inner.pause();
  }

  /** The socket's byte counters (Http2PeerWatch compares them). */
  get bytesRead(): number {
    return (this.inner as Partial<Socket>).bytesRead ?? 0;
  }

  get bytesWritten(): number {
    return (this.inner as Partial<Socket>).bytesWritten ?? 0;
  }

  override _read(): void {
    this.inner.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.inner.write(chunk, cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.inner.end(cb);
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.inner.destroy(err ?? undefined);
    cb(err);
  }
}
