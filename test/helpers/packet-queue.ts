import type { Packet } from "../../lib/proto/packet.js";

/**
 * Collects packets from a stream so a test can await the next one that matches, without
 * sleeping. Fails with the list of what did arrive when the wait times out.
 */
export class PacketQueue {
  private readonly items: Packet[] = [];
  private waiter: { match: (p: Packet) => boolean; resolve: (p: Packet) => void } | null = null;
  ended = false;

  constructor(stream: NodeJS.EventEmitter) {
    stream.on("data", (p: Packet) => {
      if (this.waiter?.match(p)) {
        const w = this.waiter;
        this.waiter = null;
        w.resolve(p);
        return;
      }
      this.items.push(p);
    });
    stream.on("end", () => {
      this.ended = true;
    });
    stream.on("error", () => {
      this.ended = true;
    });
  }

  next<T extends Packet>(match: (p: Packet) => p is T, timeoutMs?: number): Promise<T>;
  next(match?: (p: Packet) => boolean, timeoutMs?: number): Promise<Packet>;
  next(match: (p: Packet) => boolean = () => true, timeoutMs = 5000): Promise<Packet> {
    const i = this.items.findIndex(match);
    if (i !== -1) return Promise.resolve(this.items.splice(i, 1)[0]!);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = null;
        reject(new Error(`no matching packet within ${timeoutMs}ms; got ${JSON.stringify(this.items, big)}`));
      }, timeoutMs);
      this.waiter = {
        match,
        resolve: (p) => {
          clearTimeout(timer);
          resolve(p);
        },
      };
    });
  }

  /** Packets received and not yet taken. */
  get pending(): readonly Packet[] {
    return this.items;
  }
}

function big(_k: string, v: unknown): unknown {
  if (typeof v === "bigint") return `${v}n`;
  if (v instanceof Uint8Array) return `<${v.byteLength} bytes>`;
  return v;
}

export const isType =
  <K extends Packet["type"]>(type: K) =>
  (p: Packet): p is Extract<Packet, { type: K }> =>
    p.type === type;
