/**
 * A complete gateway on one machine for the quick start: a throwaway CA, a gateway, an agent,
 * and a "cluster" HTTP service behind the agent. Nothing leaves loopback, nothing needs AWS or
 * Docker, and every credential is generated fresh in `dir`.
 */
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { type RunningAgent, startAgent } from "../agent/agent.js";
import { parseAgentOptions } from "../config/agent-options.js";
import { parseServerOptions } from "../config/server-options.js";
import { AgentMetrics } from "../metrics/agent-metrics.js";
import type { Logger } from "../observability/logger.js";
import { createCa } from "../pki/ca.js";
import { writePemFiles } from "../pki/files.js";
import { Gateway } from "../server/gateway.js";
import { singleTenantPolicy } from "../server/policy/gateway-policy.js";

/** The ports the demo listens on without --ephemeral-ports: upstream's defaults, on loopback. */
export const DEMO_PORTS = {
  frontend: 8090,
  agent: 8132,
  admin: 8133,
  health: 8134,
  agentHealth: 8093,
  agentAdmin: 8094,
} as const;

export interface LocalStackOptions {
  dir: string;
  /** Use port 0 everywhere instead of DEMO_PORTS. */
  ephemeralPorts: boolean;
  log: Logger;
}

export interface LocalStack {
  gateway: Gateway;
  agent: RunningAgent;
  /** host:port of the demo service that only the agent can reach in a real cluster. */
  service: string;
  files: Record<"caCert" | "serverCert" | "serverKey" | "clientCert" | "clientKey", string>;
  stop(): Promise<void>;
}

function unwrap<T>(parsed: { help: true } | { help: false; options: T }): T {
  if (parsed.help) throw new Error("unexpected --help");
  return parsed.options;
}

export async function startLocalStack(opts: LocalStackOptions): Promise<LocalStack> {
  const ca = await createCa({ commonName: "kgw-demo-ca", validityDays: 7 });
  const server = await ca.issue({
    commonName: "localhost",
    dnsNames: ["localhost"],
    ipAddresses: ["127.0.0.1", "::1"],
    usage: "server",
    validityDays: 7,
  });
  const client = await ca.issue({ commonName: "kube-apiserver", usage: "client", validityDays: 7 });
  const written = await writePemFiles(opts.dir, {
    "ca.pem": ca.certPem,
    "server.pem": server.certPem,
    "server-key.pem": server.keyPem,
    "client.pem": client.certPem,
    "client-key.pem": client.keyPem,
  });
  const files = {
    caCert: written["ca.pem"],
    serverCert: written["server.pem"],
    serverKey: written["server-key.pem"],
    clientCert: written["client.pem"],
    clientKey: written["client-key.pem"],
  };
  const token = randomBytes(24).toString("base64url");
  const port = (name: keyof typeof DEMO_PORTS) => (opts.ephemeralPorts ? 0 : DEMO_PORTS[name]);

  const service = await startDemoService();
  // Whatever started is stopped again when a later step fails (a busy port, most often), so that
  // the process can exit instead of hanging on an open listener.
  let gateway: Gateway;
  try {
    gateway = await startGateway(opts, files, token, port);
  } catch (err) {
    await closeHttp(service.server);
    throw err;
  }
  let agent: RunningAgent;
  try {
    agent = await startStackAgent(opts, files, token, port, gateway.addresses.agent.port);
  } catch (err) {
    await gateway.close();
    await closeHttp(service.server);
    throw err;
  }
  return {
    gateway,
    agent,
    service: service.address,
    files,
    async stop() {
      await agent.stop();
      await gateway.close();
      await closeHttp(service.server);
    },
  };
}

type Files = LocalStack["files"];
type PortOf = (name: keyof typeof DEMO_PORTS) => number;

function startGateway(opts: LocalStackOptions, files: Files, token: string, port: PortOf): Promise<Gateway> {
  const serverOptions = unwrap(
    parseServerOptions(
      [
        `--server-port=${port("frontend")}`,
        "--server-bind-address=127.0.0.1",
        `--server-cert=${files.serverCert}`,
        `--server-key=${files.serverKey}`,
        `--server-ca-cert=${files.caCert}`,
        `--uds-name=${join(opts.dir, "konnectivity-server.sock")}`,
        `--agent-port=${port("agent")}`,
        "--agent-bind-address=127.0.0.1",
        `--cluster-cert=${files.serverCert}`,
        `--cluster-key=${files.serverKey}`,
        `--admin-port=${port("admin")}`,
        `--health-port=${port("health")}`,
        "--health-bind-address=127.0.0.1",
      ],
      { KGW_AGENT_TOKEN: token },
    ),
  );
  return Gateway.start(serverOptions, {
    log: opts.log.child({ component: "server" }),
    policy: singleTenantPolicy(serverOptions),
  });
}

function startStackAgent(
  opts: LocalStackOptions,
  files: Files,
  token: string,
  port: PortOf,
  gatewayAgentPort: number,
): Promise<RunningAgent> {
  return startAgent(
    unwrap(
      parseAgentOptions(
        [
          "--proxy-server-host=127.0.0.1",
          `--proxy-server-port=${gatewayAgentPort}`,
          "--server-name=localhost",
          `--ca-cert=${files.caCert}`,
          "--agent-id=demo-agent",
          "--health-server-host=127.0.0.1",
          `--health-server-port=${port("agentHealth")}`,
          `--admin-server-port=${port("agentAdmin")}`,
        ],
        { KGW_AGENT_TOKEN: token },
      ),
    ),
    { log: opts.log.child({ component: "agent" }), metrics: new AgentMetrics() },
  );
}

async function startDemoService(): Promise<{ server: Server; address: string }> {
  const server = createServer((req, res) => {
    res.setHeader("content-type", "text/plain");
    res.end(`hello from inside the cluster: you asked for ${req.method} ${req.url}\n`);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, address: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

function closeHttp(server: Server): Promise<void> {
  return new Promise((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
}
