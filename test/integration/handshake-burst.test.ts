/**
 * A burst of TLS connections from one source address, as a large cluster behind one NAT address
 * makes when it reconnects at once (issue 26): with the default limits every connection over
 * them waits its turn and completes its handshake, none is reset; the protections still bound
 * what a flood that never finishes can hold (its source's handshake slots until the handshake
 * timeout, a bounded number waiting, no longer than that timeout).
 */
import { connect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";
import { getTestPki } from "../helpers/pki.js";
import { expectNoLeakedResources, activeResources as resources } from "../helpers/resources.js";

/** A few hundred: over the per-source limit (64) three times, and quick enough for CI. */
const BURST = 200;

let baseline: Map<string, number>;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  await getTestPki();
  baseline = resources();
});
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});
afterAll(async () => {
  await expectNoLeakedResources(baseline);
});

async function gateway(flags: string[]): Promise<TestGateway> {
  const t = await startTestGateway(flags);
  cleanup.push(() => t.gw.close());
  return t;
}

/**
 * `n` mTLS connections to the frontend from 127.0.0.1 whose handshakes start at once: every TCP
 * connection is opened, and accepted by the server (counted by its gate, or closed by it), before
 * any sends its ClientHello, as when a whole cluster's agents reconnect together. Resolves with
 * how many finished their handshake and how many were reset. Each is kept open until every one
 * has an outcome (with TLS 1.3 a client is done before the server has checked its certificate:
 * closing at once would fail the server's side of the handshake), then closed.
 */
async function burst(t: TestGateway, n: number): Promise<{ handshaken: number; reset: number }> {
  const port = t.gw.addresses.frontend!.port;
  let closedBeforeTls = 0;
  const raws = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<Socket>((resolve, reject) => {
          const s = connect({ port, host: "127.0.0.1" });
          s.once("connect", () => resolve(s));
          s.once("error", reject);
        }),
    ),
  );
  const onClose = () => closedBeforeTls++;
  for (const s of raws) {
    s.on("error", () => {});
    s.once("close", onClose);
  }
  await waitFor(
    async () =>
      (await gauge(t, "tlsHandshakes", "frontend")) +
        (await gauge(t, "tlsHandshakesWaiting", "frontend")) +
        closedBeforeTls >=
      n,
    10_000,
    "every connection accepted",
  );
  const sockets: ReturnType<typeof tlsConnect>[] = [];
  const outcomes = await Promise.all(
    raws.map(
      (raw) =>
        new Promise<"handshaken" | "reset">((resolve) => {
          raw.off("close", onClose);
          if (raw.destroyed) {
            resolve("reset");
            return;
          }
          const s = tlsConnect({
            socket: raw,
            servername: "localhost",
            ca: t.pki.ca.certPem,
            cert: t.pki.frontend.certPem,
            key: t.pki.frontend.keyPem,
          });
          sockets.push(s);
          s.on("error", () => {});
          s.once("secureConnect", () => resolve("handshaken"));
          s.once("close", () => resolve("reset"));
        }),
    ),
  );
  // The server has finished each handshake it started (none is left in progress or waiting).
  await waitFor(
    async () =>
      (await gauge(t, "tlsHandshakes", "frontend")) === 0 &&
      (await gauge(t, "tlsHandshakesWaiting", "frontend")) === 0,
    10_000,
    "the server's handshakes done",
  );
  for (const s of sockets) s.destroy();
  for (const s of raws) s.destroy();
  return {
    handshaken: outcomes.filter((o) => o === "handshaken").length,
    reset: outcomes.filter((o) => o === "reset").length,
  };
}

/** `n` connections from `from` to `port` that never send a byte; counts those the server closed. */
function silentFlood(port: number, n: number, from: string): { sockets: Socket[]; closed(): number } {
  let closed = 0;
  const sockets: Socket[] = [];
  for (let i = 0; i < n; i++) {
    const s = connect({ port, host: "127.0.0.1", localAddress: from });
    s.on("error", () => {});
    s.once("close", () => closed++);
    sockets.push(s);
  }
  cleanup.push(() => {
    for (const s of sockets) s.destroy();
  });
  return { sockets, closed: () => closed };
}

/** The connections `listener` refused or closed before TLS, by reason. */
async function rejectedBy(t: TestGateway, listener: string): Promise<Record<string, number>> {
  const m = await t.gw.metrics.rejectedConnections.get();
  const by: Record<string, number> = {};
  for (const v of m.values) {
    if (v.labels.listener === listener && v.value > 0) by[String(v.labels.reason)] = v.value;
  }
  return by;
}

async function gauge(
  t: TestGateway,
  which: "tlsHandshakes" | "tlsHandshakesWaiting",
  listener: string,
): Promise<number> {
  const m = await t.gw.metrics[which].get();
  return m.values.find((v) => v.labels.listener === listener)?.value ?? 0;
}

describe("a burst of TLS connections from one address", () => {
  it(`with the default limits: all ${BURST} complete their handshake, none is reset`, async () => {
    const t = await gateway([]);
    expect(await burst(t, BURST)).toEqual({ handshaken: BURST, reset: 0 });
    expect(await rejectedBy(t, "frontend")).toEqual({});
  });

  it("completes while a silent flood from the same address holds some of its handshake slots", async () => {
    const t = await gateway(["--max-tls-handshakes-per-source=8", "--tls-handshake-timeout=2s"]);
    const flood = silentFlood(t.gw.addresses.frontend!.port, 4, "127.0.0.1");
    await waitFor(async () => (await gauge(t, "tlsHandshakes", "frontend")) === 4, 5000, "the flood held");
    // The burst goes through the four slots the flood left, the rest of it waiting its turn; the
    // flood is closed at its handshake timeout, as before.
    expect(await burst(t, BURST)).toEqual({ handshaken: BURST, reset: 0 });
    await waitFor(() => flood.closed() === 4, 5000, "the flood closed");
    expect(await rejectedBy(t, "frontend")).toEqual({ tls: 4 });
  });
});

describe("a flood that never finishes its handshakes, from one address", () => {
  it("holds its source's slots and a bounded number waiting, each no longer than the handshake timeout", async () => {
    const t = await gateway([
      "--max-tls-handshakes-per-source=8",
      "--max-tls-handshakes-waiting=16",
      "--tls-handshake-timeout=1s",
    ]);
    const flood = silentFlood(t.gw.addresses.agent.port, 40, "127.0.0.2");
    // Eight in progress, sixteen waiting, the sixteen beyond reset at once.
    await waitFor(() => flood.closed() === 16, 3000, "the sixteen with nowhere to wait reset");
    expect(await rejectedBy(t, "agent")).toEqual({ handshakes_per_source: 16 });
    expect(await gauge(t, "tlsHandshakes", "agent")).toBe(8);
    expect(await gauge(t, "tlsHandshakesWaiting", "agent")).toBe(16);
    // Another source is not held back: an agent from 127.0.0.1 connects.
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
    cleanup.push(() => agent.stop());
    await waitFor(() => t.gw.registry.size === 1, 5000, "agent connected");
    // Every one of the flood is closed in the end: by its handshake timeout, or after waiting
    // that long for a slot; none is left holding a descriptor.
    await waitFor(() => flood.closed() === 40, 10_000, "the whole flood closed");
    const by = await rejectedBy(t, "agent");
    expect(by.handshakes_per_source).toBe(16);
    expect((by.tls ?? 0) + (by.handshake_wait ?? 0)).toBe(24);
    expect(by.handshake_wait).toBeGreaterThan(0);
    expect(await gauge(t, "tlsHandshakesWaiting", "agent")).toBe(0);
  });

  it("closes a waiting connection that sends more than a ClientHello, and keeps one that does not", async () => {
    const t = await gateway(["--max-tls-handshakes-per-source=1"]);
    const port = t.gw.addresses.agent.port;
    silentFlood(port, 1, "127.0.0.2"); // holds the source's one slot
    await waitFor(async () => (await gauge(t, "tlsHandshakes", "agent")) === 1, 5000, "the slot held");
    // The first bytes of a ClientHello (a 512-byte record, unfinished), then 20 KiB more.
    const hello = Buffer.alloc(300);
    Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]).copy(hello);
    const [polite, greedy] = silentFlood(port, 2, "127.0.0.2").sockets;
    polite!.write(hello);
    greedy!.write(Buffer.concat([hello, Buffer.alloc(20 * 1024)]));
    let greedyClosed = false;
    greedy!.once("close", () => {
      greedyClosed = true;
    });
    await waitFor(() => greedyClosed, 5000, "the connection that sent too much closed");
    expect(await rejectedBy(t, "agent")).toEqual({ handshake_wait: 1 });
    expect(await gauge(t, "tlsHandshakesWaiting", "agent")).toBe(1);
    expect(polite!.destroyed).toBe(false);
  });
});
