import { PassThrough } from "node:stream";
import { credentials } from "@grpc/grpc-js";
import { TunnelClient } from "../../lib/client/tunnel-client.js";
import { parseServerOptions } from "../../lib/config/server-options.js";
import { ServerMetrics } from "../../lib/metrics/server-metrics.js";
import { createLogger, type Logger } from "../../lib/observability/logger.js";
import { Gateway } from "../../lib/server/gateway.js";
import type { GatewayDeps } from "../../lib/server/gateway-deps.js";
import { openPolicy } from "../../lib/server/policy/open-policy.js";
import { getTestPki, type TestPki } from "./pki.js";

export const AGENT_TOKEN = "test-agent-token-0123456789";

export interface TestGateway {
  gw: Gateway;
  pki: TestPki;
  /** host:port strings */
  frontend: string;
  agent: string;
  health: string;
  admin: string;
  logs: string[];
  log: Logger;
}

/** A logger whose JSON lines are kept for assertions (and never printed). */
export function captureLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new PassThrough();
  sink.on("data", (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean)));
  return { log: createLogger({ name: "test", level: "debug", destination: sink }), lines };
}

/** Gateway flags for the test PKI: loopback, every port 0, mTLS frontend, token and CA agents. */
export function gatewayFlags(pki: TestPki): string[] {
  const f = pki.files;
  return [
    "--server-port=0",
    "--server-bind-address=127.0.0.1",
    `--server-cert=${f.serverCert}`,
    `--server-key=${f.serverKey}`,
    `--server-ca-cert=${f.caCert}`,
    "--agent-port=0",
    "--agent-bind-address=127.0.0.1",
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    `--cluster-ca-cert=${f.caCert}`,
    `--agent-token=${AGENT_TOKEN}`,
    "--admin-port=0",
    "--health-port=0",
    "--health-bind-address=127.0.0.1",
    "--graceful-shutdown-timeout=2s",
  ];
}

/**
 * Starts a real gateway on loopback, every port 0, through the same option parser the CLI uses.
 * `flags` are appended, so tests can override any default.
 */
export async function startTestGateway(
  flags: string[] = [],
  deps: Pick<GatewayDeps, "callerBytesRead"> = {},
): Promise<TestGateway> {
  const pki = await getTestPki();
  return startGatewayWith(pki, [...gatewayFlags(pki), ...flags], deps);
}

/**
 * Gateway flags for tenant mode: the tenant store in `storeDir`, the test CA as the gateway CA
 * (tenants' certificates must be issued by it), the agent port serving every role, and a short
 * watch interval so that revocation tests are quick.
 */
export function tenantGatewayFlags(pki: TestPki, storeDir: string): string[] {
  const f = pki.files;
  return [
    `--tenant-store-dir=${storeDir}`,
    `--tenant-ca-cert=${f.caCert}`,
    "--tenant-watch-interval=250ms",
    "--agent-port=0",
    "--agent-bind-address=127.0.0.1",
    `--cluster-cert=${f.serverCert}`,
    `--cluster-key=${f.serverKey}`,
    "--admin-port=0",
    "--health-port=0",
    "--health-bind-address=127.0.0.1",
    "--graceful-shutdown-timeout=2s",
  ];
}

/** A gateway in tenant mode on the tenant store in `storeDir` (see tenantGatewayFlags). */
export async function startTenantGateway(storeDir: string, flags: string[] = []): Promise<TestGateway> {
  const pki = await getTestPki();
  return startGatewayWith(pki, [...tenantGatewayFlags(pki, storeDir), ...flags]);
}

async function startGatewayWith(
  pki: TestPki,
  argv: string[],
  deps: Pick<GatewayDeps, "callerBytesRead"> = {},
): Promise<TestGateway> {
  const parsed = parseServerOptions(argv, {});
  if (parsed.help) throw new Error("unexpected help");
  const { log, lines } = captureLogger();
  const metrics = new ServerMetrics();
  const policy = await openPolicy(parsed.options, log, metrics);
  const gw = await Gateway.start(parsed.options, { log, policy, metrics, ...deps });
  const hp = (a: { port: number } | null) => (a ? `127.0.0.1:${a.port}` : "");
  return {
    gw,
    pki,
    frontend: hp(gw.addresses.frontend),
    agent: hp(gw.addresses.agent),
    health: hp(gw.addresses.health),
    admin: hp(gw.addresses.admin),
    logs: lines,
    log,
  };
}

/** A gRPC caller of `t`'s frontend with the test PKI's frontend certificate (mTLS). */
export function frontendClient(t: TestGateway): TunnelClient {
  return new TunnelClient(
    t.frontend,
    credentials.createSsl(
      Buffer.from(t.pki.ca.certPem),
      Buffer.from(t.pki.frontend.keyPem),
      Buffer.from(t.pki.frontend.certPem),
    ),
    { "grpc.ssl_target_name_override": "localhost" },
  );
}
