/**
 * The plain relay (the two-hop baseline) and the delay proxy. Each runs in its own process.
 *
 * The relay only pipes bytes: no TLS, no framing, Node's own `pipe`, TCP_NODELAY on both sides
 * (as every hop of the tunnel sets it).
 *
 * The delay proxy is a delay line: each chunk read is stamped with the time it may leave and
 * written when that time comes, so it adds latency without limiting bandwidth. Its only limit is
 * MAX_IN_FLIGHT_BYTES per direction and connection: past that it stops reading (TCP then slows
 * the sender). Note what this models: the TCP connections on either side of the delay see a
 * loopback round trip, so only flow control *above* TCP (HTTP/2 windows, per-connection credit)
 * feels the delay. That is the situation of a WAN path whose TCP windows are tuned large enough.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { now } from "./util.js";

/** Per direction and connection: 64 MiB covers 20 ms at 3 GB/s. */
export const MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024;

export function createRelay(targetPort: number, targetHost = "127.0.0.1"): Server {
  return createServer({ noDelay: true }, (inbound) => {
    const outbound = connect({ port: targetPort, host: targetHost, noDelay: true });
    const kill = () => {
      inbound.destroy();
      outbound.destroy();
    };
    for (const s of [inbound, outbound]) {
      s.on("error", kill);
      s.on("close", kill);
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
}

export function createDelayProxy(targetPort: number, delayMs: number, targetHost = "127.0.0.1"): Server {
  return createServer({ noDelay: true, allowHalfOpen: true }, (inbound) => {
    const outbound = connect({ port: targetPort, host: targetHost, noDelay: true, allowHalfOpen: true });
    const lines = [new DelayLine(inbound, outbound, delayMs), new DelayLine(outbound, inbound, delayMs)];
    const kill = () => {
      for (const l of lines) l.stop();
      inbound.destroy();
      outbound.destroy();
    };
    for (const s of [inbound, outbound]) {
      s.on("error", kill);
      s.on("close", kill);
    }
  });
}

interface Slot {
  due: number;
  /** null: the source ended (FIN), to be passed on in order. */
  chunk: Buffer | null;
}

class DelayLine {
  private readonly queue: Slot[] = [];
  private head = 0;
  private inFlight = 0;
  private timer: NodeJS.Timeout | null = null;
  private blocked = false;
  private stopped = false;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly delayMs: number,
  ) {
    from.on("data", (c: Buffer) => this.push(c));
    from.on("end", () => this.push(null));
    to.on("drain", () => {
      this.blocked = false;
      this.flush();
    });
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.queue.length = 0;
    this.head = 0;
  }

  private push(chunk: Buffer | null): void {
    if (this.stopped) return;
    this.queue.push({ due: now() + this.delayMs, chunk });
    if (chunk) {
      this.inFlight += chunk.length;
      if (this.inFlight > MAX_IN_FLIGHT_BYTES) this.from.pause();
    }
    this.flush();
  }

  private flush(): void {
    if (this.stopped || this.blocked) return;
    const t = now();
    while (this.head < this.queue.length) {
      const slot = this.queue[this.head]!;
      if (slot.due > t) break;
      this.head++;
      if (slot.chunk === null) {
        this.to.end();
        continue;
      }
      this.inFlight -= slot.chunk.length;
      if (!this.to.write(slot.chunk)) {
        this.blocked = true;
        break;
      }
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
    if (this.inFlight <= MAX_IN_FLIGHT_BYTES / 2 && this.from.isPaused()) this.from.resume();
    if (!this.blocked && this.head < this.queue.length && this.timer === null) {
      const wait = Math.max(0, this.queue[this.head]!.due - now());
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flush();
      }, wait);
    }
  }
}
