/**
 * What a gateway and agent refuse unless told otherwise: anonymous callers on the TCP frontend
 * (explicit flag, loud warning) and dials to link-local and cloud metadata addresses. No packet
 * goes to such an address: the agent's resolver is injected, and its socket factory would hand
 * out a socket that never connects.
 */

import { isIP, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { ResolvedTarget } from "../../lib/agent/dial-target.js";
import { type HostResolver, systemResolver } from "../../lib/agent/host-resolver.js";
import { startTestAgent, waitFor } from "../helpers/agent.js";
import { connectThrough } from "../helpers/connect-client.js";
import { frontendClient, startTestGateway, type TestGateway } from "../helpers/gateway.js";

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function gateway(flags: string[] = []): Promise<TestGateway> {
  const t = await startTestGateway(flags);
  cleanups.push(() => t.gw.close());
  return t;
}

const warnings = (t: TestGateway) =>
  t.logs.map((l) => JSON.parse(l) as { level: string; msg: string }).filter((l) => l.level === "warn");

describe("the TCP frontend without client certificates", () => {
  it("serves anonymous callers only with --allow-anonymous-callers, and warns at startup", async () => {
    const t = await gateway(["--server-ca-cert=", "--allow-anonymous-callers"]);
    expect(warnings(t).map((w) => w.msg)).toEqual([
      "the TCP frontend accepts anonymous callers: anyone who can reach it can open tunnels into the cluster",
    ]);
    // No certificate, yet the request is served: 503 because no agent is connected.
    const r = await connectThrough(
      { kind: "tls", host: "127.0.0.1", port: t.gw.addresses.frontend!.port, pki: t.pki, clientCert: false },
      "10.0.0.1:443",
    );
    expect(r.status).toBe(503);
    r.socket.destroy();
  });

  it("says nothing when callers need a certificate (mTLS, the default)", async () => {
    const t = await gateway();
    expect(warnings(t)).toEqual([]);
  });
});

describe("link-local destinations", () => {
  it("are refused by our agent after resolution: CONNECT 403, a gRPC dial error, a metric", async () => {
    const t = await gateway();
    const resolveHost: HostResolver = async (host) => {
      if (host === "metadata.test") return [{ address: "169.254.169.254", family: 4 }];
      if (isIP(host)) return systemResolver(host); // a literal: no query
      throw new Error(`getaddrinfo ENOTFOUND ${host}`);
    };
    const attempts: ResolvedTarget[] = [];
    const { agent } = await startTestAgent(t.pki, t.gw.addresses.agent.port, [], {
      resolveHost,
      connectSocket: (target) => {
        attempts.push(target);
        return new Socket(); // never connects
      },
    });
    cleanups.push(() => agent.stop());
    await waitFor(() => t.gw.ready, 5000, "agent connected");

    const r = await connectThrough(
      { kind: "tls", host: "127.0.0.1", port: t.gw.addresses.frontend!.port, pki: t.pki },
      "metadata.test:80",
    );
    expect(r.status).toBe(403);
    expect(r.headers["x-kgw-error-code"]).toBe("ERR_DESTINATION_NOT_ALLOWED");
    r.socket.destroy();

    const grpc = frontendClient(t);
    cleanups.push(() => grpc.close());
    await expect(grpc.dial("169.254.169.254:80")).rejects.toThrow(
      /^dial tcp 169\.254\.169\.254:80: destination not allowed: 169\.254\.169\.254 is link-local/,
    );

    expect(attempts).toEqual([]);
    const metrics = await (await fetch(`http://127.0.0.1:${agent.adminAddress.port}/metrics`)).text();
    expect(metrics).toContain('kgw_agent_destination_refusals_total{rule="link_local"} 2');
  });
});
