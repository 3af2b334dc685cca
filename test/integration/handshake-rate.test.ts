/**
 * --max-tls-handshake-rate: a burst of new TLS connections over the rate is partly reset at
 * accept, before TLS, while connections already open (an agent stream, a gRPC caller's channel)
 * carry on: a dial on the open channel succeeds in the middle of the burst.
 */
import { connect as tlsConnect } from "node:tls";
import { credentials } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { type HttpBackend, startHttpBackend } from "../helpers/backends.js";
import { startTestGateway, type TestGateway } from "../helpers/gateway.js";

let backend: HttpBackend;
beforeAll(async () => {
  backend = await startHttpBackend();
});
afterAll(async () => {
  await backend.close();
});

function grpcClient(t: TestGateway): TunnelClient {
  const p = t.pki;
  return new TunnelClient(
    t.frontend,
    credentials.createSsl(
      Buffer.from(p.ca.certPem),
      Buffer.from(p.frontend.keyPem),
      Buffer.from(p.frontend.certPem),
    ),
    { "grpc.ssl_target_name_override": "localhost" },
  );
}

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
  it("resets a burst over the rate at accept, and leaves open connections alone", async () => {
    const t = await startTestGateway(["--max-tls-handshake-rate=10"]);
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port);
    await waitFor(() => t.gw.ready, 5000, "agent connected");
    const client = grpcClient(t);
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

  it("is off at 0: the same burst is not refused", async () => {
    const t = await startTestGateway(["--max-tls-handshake-rate=0"]);
    const result = await burst(t, 60);
    expect(result).toEqual({ handshaken: 60, reset: 0 });
    await t.gw.close();
  });
});
