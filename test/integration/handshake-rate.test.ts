/**
 * --max-tls-handshake-rate: a burst of new TLS connections over the rate waits for the bucket and
 * is paced (with nowhere to wait, it is partly reset at accept, before TLS), while connections
 * already open (an agent stream, a gRPC caller's channel) carry on: a dial on the open channel
 * succeeds in the middle of the burst.
 */
import { connect as tlsConnect } from "node:tls";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TunnelClient } from "../../lib/client/tunnel-client.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { frontendClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";

let backend: HttpBackend;
beforeAll(async () => {
  backend = await startHttpBackend();
});
afterAll(async () => {
  await backend.close();
});

/** One gRPC dial on the client's (open) channel and a request over it; the response's status line. */
async function dialOnce(client: TunnelClient): Promise<string> {
  const tunnel = await client.dial(backend.address);
  return new Promise((resolve, reject) => {
    let got = "";
    tunnel.on("data", (c: Buffer) => {
      got += c.toString();
      if (got.includes("\r\n")) {
        tunnel.destroy();
        resolve(got.split("\r\n")[0]!);
      }
    });
    tunnel.once("error", reject);
    tunnel.write("GET /hello HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n");
  });
}

/** `n` new mTLS connections at once: how many finished their handshake, how many were reset. */
async function burst(t: TestGateway, n: number): Promise<{ handshaken: number; reset: number }> {
  const outcomes = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<"handshaken" | "reset">((resolve) => {
          const s = tlsConnect({
            host: "127.0.0.1",
            port: t.gw.addresses.frontend!.port,
            servername: "localhost",
            ca: t.pki.ca.certPem,
            cert: t.pki.frontend.certPem,
            key: t.pki.frontend.keyPem,
          });
          s.once("secureConnect", () => {
            s.destroy();
            resolve("handshaken");
          });
          s.once("error", () => resolve("reset"));
          s.once("close", () => resolve("reset"));
        }),
    ),
  );
  return {
    handshaken: outcomes.filter((o) => o === "handshaken").length,
    reset: outcomes.filter((o) => o === "reset").length,
  };
}

describe("--max-tls-handshake-rate", () => {
  it("with nowhere to wait, resets a burst over the rate at accept, and leaves open connections alone", async () => {
    const t = await startTestGateway([
      "--max-tls-handshake-rate=10",
      "--max-tls-handshake-burst=0",
      "--max-tls-handshakes-waiting=0",
    ]);
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
    await waitFor(() => t.gw.ready, 5000, "agent connected");
    const client = frontendClient(t);
    expect(await dialOnce(client)).toBe("HTTP/1.1 200 OK");

    const [result, during] = await Promise.all([burst(t, 60), dialOnce(client)]);
    // The bucket holds one second's worth (10, one taken by the channel above), refilling at
    // 10/s while the burst lasts.
    expect(result.handshaken).toBeGreaterThanOrEqual(5);
    expect(result.handshaken).toBeLessThan(30);
    expect(result.reset).toBe(60 - result.handshaken);
    expect(during).toBe("HTTP/1.1 200 OK");
    const m = await t.gw.metrics.rejectedConnections.get();
    const refused = m.values.find(
      (v) => v.labels.listener === "frontend" && v.labels.reason === "handshake_rate",
    );
    expect(refused?.value).toBe(result.reset);
    // The agent's stream, open before the burst, is still there, and still serves.
    expect(t.gw.registry.size).toBe(1);
    expect(await dialOnce(client)).toBe("HTTP/1.1 200 OK");

    client.close();
    await agent.stop();
    await t.gw.close();
  });

  it("paces a burst over the rate: its connections wait for the bucket, none is reset", async () => {
    const t = await startTestGateway(["--max-tls-handshake-rate=20", "--max-tls-handshake-burst=5"]);
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
    await waitFor(() => t.gw.ready, 5000, "agent connected");
    const client = frontendClient(t);
    expect(await dialOnce(client)).toBe("HTTP/1.1 200 OK");

    const waiting = async () =>
      (await t.gw.metrics.tlsHandshakesWaiting.get()).values.find((v) => v.labels.listener === "frontend")
        ?.value ?? 0;
    const running = burst(t, 40);
    // The bucket held five (one taken by the channel above): most of the burst waits its turn.
    await waitFor(async () => (await waiting()) > 0, 5000, "connections waiting for the bucket");
    expect(await dialOnce(client)).toBe("HTTP/1.1 200 OK");
    expect(await running).toEqual({ handshaken: 40, reset: 0 });
    // None refused by a limit ("tls" counts the server's side of handshakes the helper closed as
    // soon as its own side was done).
    const m = await t.gw.metrics.rejectedConnections.get();
    const refused = m.values.filter(
      (v) => v.labels.listener === "frontend" && v.labels.reason !== "tls" && v.value > 0,
    );
    expect(refused).toEqual([]);
    expect(await waiting()).toBe(0);

    client.close();
    await agent.stop();
    await t.gw.close();
  });

  it("is off at 0: the same burst is not refused", async () => {
    const t = await startTestGateway(["--max-tls-handshake-rate=0"]);
    const result = await burst(t, 60);
    expect(result).toEqual({ handshaken: 60, reset: 0 });
    await t.gw.close();
  });
});
